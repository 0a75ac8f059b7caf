//! Liveness after heals: how soon each client issued again, and why the
//! slowest took as long as it did.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::Heal;
use crate::history::{ClientHistory, Event};
use crate::nemesis::Fault;
use crate::timeline::FaultWindow;

/// How long one client took to issue again after a heal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The client.
    pub client: String,
    /// The heal.
    pub heal: Heal,
    /// From the heal to the first ID issued after it; `None` when the client
    /// issued none (it ended first, or never recovered).
    pub after: Option<Duration>,
    /// When that ID's lease was joined after the heal: from the heal to its
    /// acquire's answer, and to the end of the join (which waits for the
    /// client's clock to pass the worker ID's watermark).
    pub rejoined: Option<Rejoin>,
    /// From the heal to the start of the run's next fault, if one began.
    pub next_fault: Option<Duration>,
    /// Whether the recovery is judged against the bound: the client issued
    /// before the next fault began, or that fault began only after the
    /// bound (the service check's rule). A client the next fault hit
    /// before it had its chance says nothing about this heal.
    pub judged: bool,
    /// Judged, and the client issued nothing within the bound (ttl + 2 s):
    /// the recovery the network runs promise was missed.
    pub slow: bool,
    /// The client issued nothing after the heal, though the run left it
    /// a stretch of the bound without any fault between the heal and its
    /// end. A client the faults left no such stretch is not stuck.
    pub stuck: bool,
}

/// How a client that lost its lease came back after a heal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejoin {
    /// From the heal to the acquire's answer.
    pub acquired: Duration,
    /// From the heal to the end of the join.
    pub joined: Duration,
    /// The joins that failed between the heal and this one, with their
    /// errors.
    pub failed_joins: Vec<String>,
}

/// When the lease that issued `first` was joined after `heal`: its
/// acquire's answer and the join's end, from the heal.
fn rejoin_of(history: &ClientHistory, lease_of_first: u32, heal: u64) -> Option<Rejoin> {
    let (worker, fence, sent, granted) = history.events.iter().find_map(|event| match event {
        Event::Grant {
            lease,
            worker_id,
            fence,
            sent,
            granted,
            ..
        } if *lease == lease_of_first => Some((*worker_id, *fence, *sent, *granted)),
        _ => None,
    })?;
    if sent < heal {
        return None;
    }
    let acquired = history.events.iter().find_map(|event| match event {
        Event::Acquired {
            worker_id,
            fence: f,
            at,
        } if *worker_id == worker && *f == fence => Some(*at),
        _ => None,
    })?;
    let failed_joins = history
        .events
        .iter()
        .filter_map(|event| match event {
            Event::JoinFailed { at, error } if (heal..sent).contains(at) => Some(error.clone()),
            _ => None,
        })
        .collect();
    Some(Rejoin {
        acquired: Duration::from_nanos(acquired.saturating_sub(heal)),
        joined: Duration::from_nanos(granted.saturating_sub(heal)),
        failed_joins,
    })
}

/// For every heal, every client of the healed lab that was running then and
/// ran for at least `horizon` more: how long until it issued an ID again.
/// `lab_of` names each client's lab; clients whose history ended within
/// the horizon (stopped, crashed or killed) are left out (their silence is
/// not the network's). `windows` are the run's faults: a
/// recovery the next of them cut short before `bound` is not judged, and a
/// client that issued nothing after the heal is stuck only if they left it
/// a stretch of `bound` without any fault before it ended.
pub fn liveness(
    histories: &[ClientHistory],
    heals: &[Heal],
    windows: &[FaultWindow],
    lab_of: impl Fn(&str) -> Option<usize>,
    horizon: Duration,
    bound: Duration,
) -> Vec<Recovery> {
    let horizon = u64::try_from(horizon.as_nanos()).unwrap_or(u64::MAX);
    let mut out = Vec::new();
    for heal in heals {
        for history in histories {
            if lab_of(&history.client) != Some(heal.lab) {
                continue;
            }
            let (Some(start), Some(end)) = (first_instant(history), last_instant(history)) else {
                continue;
            };
            if start > heal.at || end < heal.at + horizon {
                continue;
            }
            let first = history.events.iter().find_map(|event| match event {
                Event::Ids { t0, lease, .. } if *t0 >= heal.at => Some((*t0, *lease)),
                _ => None,
            });
            let after = first.map(|(t0, _)| Duration::from_nanos(t0 - heal.at));
            let next_fault = windows
                .iter()
                .map(|w| w.began)
                .filter(|&began| began > heal.at)
                .min()
                .map(|began| Duration::from_nanos(began - heal.at));
            let judged = crate::recovery::judged(after, next_fault, bound);
            let stuck = after.is_none() && quiet_stretch(windows, heal.at, end, bound);
            out.push(Recovery {
                client: history.client.clone(),
                heal: *heal,
                after,
                rejoined: first.and_then(|(_, lease)| rejoin_of(history, lease, heal.at)),
                next_fault,
                judged,
                slow: judged && after.is_none_or(|after| after > bound),
                stuck,
            });
        }
    }
    out
}

/// Whether `windows` leave a stretch of `bound` without any fault between
/// `from` and `until` (ns).
fn quiet_stretch(windows: &[FaultWindow], from: u64, until: u64, bound: Duration) -> bool {
    let bound = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
    let mut faults: Vec<(u64, u64)> = windows
        .iter()
        .filter(|w| w.ended > from && w.began < until)
        .map(|w| (w.began, w.ended))
        .collect();
    faults.sort_unstable();
    let mut quiet_since = from;
    for (began, ended) in faults {
        if began.saturating_sub(quiet_since) >= bound {
            return true;
        }
        quiet_since = quiet_since.max(ended);
    }
    until.saturating_sub(quiet_since) >= bound
}

fn first_instant(history: &ClientHistory) -> Option<u64> {
    history.events.iter().map(instant).next()
}

fn last_instant(history: &ClientHistory) -> Option<u64> {
    history.events.iter().map(instant).next_back()
}

/// When an event happened (an ID batch: when its last ID was issued).
fn instant(event: &Event) -> u64 {
    match event {
        Event::Start { at, .. }
        | Event::Lost { at, .. }
        | Event::Stopping { at, .. }
        | Event::Stopped { at, .. }
        | Event::JoinFailed { at, .. }
        | Event::Clock { at, .. }
        | Event::Crash { at, .. }
        | Event::Acquired { at, .. } => *at,
        Event::Grant { granted, .. } => *granted,
        Event::Ids { t1, .. } => *t1,
    }
}

/// The judged recoveries as a distribution (count, median, p90, worst),
/// overall and per fault, how many the next fault cut short, and the
/// clients that never issued again though a stretch without faults
/// followed the heal ([`Recovery::stuck`]).
pub fn summarize(recoveries: &[Recovery]) -> String {
    let mut lines = vec![distribution("liveness after heals", recoveries)];
    let slow = recoveries.iter().filter(|r| r.slow).count();
    if slow > 0 {
        lines[0].push_str(&format!("; past the bound (ttl + 2 s): {slow}"));
    }
    let cut_short = recoveries.iter().filter(|r| !r.judged).count();
    if cut_short > 0 {
        lines[0].push_str(&format!(
            "; not judged: {cut_short} (the next fault began before they issued)"
        ));
    }
    let faults: BTreeSet<Fault> = recoveries.iter().map(|r| r.heal.fault).collect();
    for fault in faults {
        let of: Vec<Recovery> = recoveries
            .iter()
            .filter(|r| r.heal.fault == fault)
            .cloned()
            .collect();
        if !of.is_empty() {
            lines.push(distribution(&format!("  after {fault:?}"), &of));
        }
    }
    let worst = recoveries
        .iter()
        .filter(|r| r.judged)
        .filter_map(|r| r.after.map(|after| (after, r)))
        .max_by_key(|(after, _)| *after);
    if let Some((after, r)) = worst {
        let how = match &r.rejoined {
            Some(Rejoin {
                acquired,
                joined,
                failed_joins,
            }) => {
                let mut failed: BTreeMap<&str, usize> = BTreeMap::new();
                for error in failed_joins {
                    *failed.entry(error.as_str()).or_default() += 1;
                }
                let failed: Vec<String> = failed
                    .iter()
                    .map(|(error, n)| format!("{error:?} x{n}"))
                    .collect();
                format!(
                    "its lease lost, acquired again {:.2} s after the heal, joined {:.2} s \
                     after it (the join waits for the clock to pass the worker ID's \
                     watermark); joins failed after the heal: [{}]",
                    acquired.as_secs_f64(),
                    joined.as_secs_f64(),
                    failed.join(", ")
                )
            }
            None => "on the lease it held through the fault".to_string(),
        };
        lines.push(format!(
            "  the worst: {} after {:?}, issued {:.2} s after the heal, {how}",
            r.client,
            r.heal.fault,
            after.as_secs_f64()
        ));
    }
    lines.join("\n")
}

fn distribution(what: &str, recoveries: &[Recovery]) -> String {
    let mut times: Vec<Duration> = recoveries
        .iter()
        .filter(|r| r.judged)
        .filter_map(|r| r.after)
        .collect();
    times.sort_unstable();
    let stuck: Vec<String> = recoveries
        .iter()
        .filter(|r| r.stuck)
        .map(|r| format!("{} after the heal at {}", r.client, r.heal.at))
        .collect();
    if times.is_empty() && stuck.is_empty() {
        return format!("{what}: nothing to judge");
    }
    let at = |q: f64| {
        times
            .get(((times.len() as f64 - 1.0) * q).round() as usize)
            .map_or("-".to_string(), |d| format!("{:.2} s", d.as_secs_f64()))
    };
    format!(
        "{what}: {} recoveries, median {}, p90 {}, worst {}; never issued again: {}",
        times.len(),
        at(0.5),
        at(0.9),
        at(1.0),
        if stuck.is_empty() {
            "none".to_string()
        } else {
            stuck.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A client of lab 0 that started at 0, issued at each of `issued` (s)
    /// and ran until 100 s.
    fn client(issued: &[u64]) -> ClientHistory {
        let mut events = vec![Event::Start {
            client: "c000".into(),
            pid: 1,
            unsafe_mode: false,
            ticking: false,
            at: 0,
            offset_ms: 0,
            rate_ppm: 0,
        }];
        events.extend(issued.iter().map(|&at| Event::Ids {
            lease: 0,
            t0: at * S,
            tl: at * S,
            t1: at * S,
            deadline: (at + 2) * S,
            window_end: 0,
            ids: vec![at],
        }));
        events.push(Event::Stopping {
            lease: 0,
            at: 100 * S,
        });
        ClientHistory {
            client: "c000".into(),
            events,
        }
    }

    fn window(began: u64) -> FaultWindow {
        FaultWindow {
            kind: "DropReplies".into(),
            began: began * S,
            ended: (began + 3) * S,
        }
    }

    /// Heal at 10 s; the client issues again at `issued`; the next fault
    /// begins at `next`; bound 4 s: (judged, slow, after in s).
    fn judge(issued: u64, next: Option<u64>) -> (bool, bool, u64) {
        let heal = Heal {
            fault: Fault::DropReplies,
            lab: 0,
            at: 10 * S,
        };
        let windows: Vec<FaultWindow> = next.into_iter().map(window).collect();
        let recoveries = liveness(
            &[client(&[5, issued])],
            &[heal],
            &windows,
            |_| Some(0),
            Duration::from_secs(6),
            Duration::from_secs(4),
        );
        assert_eq!(recoveries.len(), 1);
        let r = &recoveries[0];
        (r.judged, r.slow, r.after.map_or(u64::MAX, |d| d.as_secs()))
    }

    #[test]
    fn a_recovery_is_judged_unless_the_next_fault_cut_it_short() {
        // No later fault, or one after the client issued: judged.
        assert_eq!(judge(12, None), (true, false, 2));
        assert_eq!(judge(12, Some(13)), (true, false, 2));
        // A slow recovery with time enough before the next fault: judged,
        // and past the bound.
        assert_eq!(judge(17, Some(15)), (true, true, 7));
        assert_eq!(judge(17, None), (true, true, 7));
        // The next fault began 1 s after the heal, before the client
        // issued: not judged.
        assert_eq!(judge(17, Some(11)), (false, false, 7));
        let summary = summarize(&liveness(
            &[client(&[5, 17])],
            &[Heal {
                fault: Fault::DropReplies,
                lab: 0,
                at: 10 * S,
            }],
            &[window(11)],
            |_| Some(0),
            Duration::from_secs(6),
            Duration::from_secs(4),
        ));
        assert!(summary.contains("not judged: 1"), "{summary}");
        assert!(!summary.contains("worst 7"), "{summary}");
        assert!(!summary.contains("past the bound"), "{summary}");
    }

    #[test]
    fn a_client_silent_after_a_heal_is_stuck_when_a_quiet_stretch_followed() {
        let silent = |next: Option<u64>, until: u64| {
            let mut history = client(&[5]);
            if let Some(Event::Stopping { at, .. }) = history.events.last_mut() {
                *at = until * S;
            }
            let recoveries = liveness(
                &[history],
                &[Heal {
                    fault: Fault::DropReplies,
                    lab: 0,
                    at: 10 * S,
                }],
                &next.into_iter().map(window).collect::<Vec<_>>(),
                |_| Some(0),
                Duration::from_secs(6),
                Duration::from_secs(4),
            );
            let summary = summarize(&recoveries);
            let r = recoveries[0].clone();
            assert_eq!(r.after, None);
            (r.judged, r.slow, r.stuck, summary)
        };
        // Heal at 10 s, bound 4 s. No fault after the heal, or one the
        // client had the bound before: judged, slow and stuck, and named.
        for next in [None, Some(15)] {
            let (judged, slow, stuck, summary) = silent(next, 100);
            assert_eq!((judged, slow, stuck), (true, true, true), "{next:?}");
            assert!(
                summary.contains("never issued again: c000 after the heal at"),
                "{summary}"
            );
        }
        // The next fault (11 s to 14 s) cut the recovery short, but the
        // client ran on long after it: not judged, yet stuck.
        let (judged, slow, stuck, summary) = silent(Some(11), 100);
        assert_eq!((judged, slow, stuck), (false, false, true));
        assert!(summary.contains("never issued again: c000"), "{summary}");
        // The same, the client ending at 17 s, before the bound had passed
        // after that fault: its silence says nothing.
        let (judged, slow, stuck, summary) = silent(Some(11), 17);
        assert_eq!((judged, slow, stuck), (false, false, false));
        assert!(!summary.contains("c000"), "{summary}");
        assert!(summary.contains("not judged: 1"), "{summary}");
    }

    #[test]
    fn a_quiet_stretch_is_one_of_the_bound_without_any_fault() {
        let w = |began: u64, ended: u64| FaultWindow {
            kind: "DropReplies".into(),
            began: began * S,
            ended: ended * S,
        };
        let bound = Duration::from_secs(4);
        let quiet =
            |windows: &[FaultWindow], until: u64| quiet_stretch(windows, 10 * S, until * S, bound);
        assert!(quiet(&[], 14));
        assert!(!quiet(&[], 13));
        // Faults 1 s apart until 20 s, overlapping ones, then quiet.
        let chain = [w(11, 13), w(14, 16), w(15, 19), w(20, 22)];
        assert!(!quiet(&chain, 25));
        assert!(quiet(&chain, 26));
        // A gap of the bound between two faults.
        assert!(quiet(&[w(11, 12), w(16, 30)], 30));
        assert!(!quiet(&[w(11, 12), w(15, 30)], 30));
        // Faults before the heal or after the end do not count.
        assert!(quiet(&[w(1, 5), w(40, 50)], 14));
        // In any order; a fault inside a longer one; one that began before
        // the heal and ended after it; one that outlasts the client.
        assert!(!quiet(&[w(15, 30), w(11, 12)], 30));
        assert!(!quiet(&[w(11, 20), w(12, 13)], 23));
        assert!(quiet(&[w(11, 20), w(12, 13)], 24));
        assert!(!quiet(&[w(8, 12)], 15));
        assert!(quiet(&[w(8, 12)], 16));
        assert!(!quiet(&[w(11, 40)], 30));
    }
}
