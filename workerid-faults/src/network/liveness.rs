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
    /// From the start of the client's recovery to the first ID it issued
    /// after the heal; `None` when it issued none (it ended first, or never
    /// recovered). The recovery starts at the heal, or later at the end of
    /// a fault that still held the client then ([`held`](Recovery::held)),
    /// or, in a pool smaller than the clients, at the last answer that
    /// every ID was held ([`waited_for_an_id`](Recovery::waited_for_an_id)).
    pub after: Option<Duration>,
    /// Another fault on this client, or on its lab or every client, still
    /// held it at the heal (a pause of the client that outlasted the cut):
    /// from the heal to that fault's end. The recovery is measured and
    /// judged from there, since a frozen client cannot issue.
    pub held: Option<Duration>,
    /// When that ID's lease was joined after the heal: from the start of the
    /// recovery to its acquire's answer, and to the end of the join (which
    /// waits for the client's clock to pass the worker ID's watermark).
    pub rejoined: Option<Rejoin>,
    /// From the start of the recovery to the start of the next fault that
    /// held this client up (on it, its lab or every client), if one began
    /// after the heal (zero if one still ran then).
    pub next_fault: Option<Duration>,
    /// In a pool smaller than the run's clients, the joins of this client
    /// found every worker ID held after the heal (before its first ID, or
    /// to its end): from the heal to the last such answer. Until then its
    /// recovery waited for another client to let an ID go, not for the
    /// network, so it is measured and judged from there.
    pub waited_for_an_id: Option<Duration>,
    /// Whether the recovery is judged against the bound: the client issued
    /// before the next fault began, or that fault began only after the
    /// bound (the service check's rule). A client the next fault hit
    /// before it had its chance says nothing about this heal.
    pub judged: bool,
    /// Judged, and the client issued nothing within the bound (ttl + 2 s):
    /// the recovery the network runs promise was missed.
    pub slow: bool,
    /// The client issued nothing after the heal, though the run left it
    /// a stretch of the bound without any fault that held it up between
    /// the heal and its end. A client the faults left no such stretch is
    /// not stuck.
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

/// When the lease that issued `first` was joined after `since` (the start
/// of the recovery): its acquire's answer and the join's end, from then.
fn rejoin_of(history: &ClientHistory, lease_of_first: u32, since: u64) -> Option<Rejoin> {
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
    if sent < since {
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
            Event::JoinFailed { at, error, .. } if (since..sent).contains(at) => {
                Some(error.clone())
            }
            _ => None,
        })
        .collect();
    Some(Rejoin {
        acquired: Duration::from_nanos(acquired.saturating_sub(since)),
        joined: Duration::from_nanos(granted.saturating_sub(since)),
        failed_joins,
    })
}

/// For every heal, every client of the healed lab that was running then and
/// ran for at least `horizon` more: how long until it issued an ID again.
/// `lab_of` names each client's lab; clients whose history ended within
/// the horizon (stopped, crashed or killed) are left out (their silence is
/// not the network's). `windows` are the run's faults; of them, only those
/// that held the client up ([`FaultWindow::touches`]) count for it:
/// - one that still held it at the heal (a pause of the client) moves the
///   start of its recovery to that fault's end;
/// - a recovery the next of them cut short before `bound` is not judged;
/// - a client that issued nothing after the heal is stuck only if they
///   left it a stretch of `bound` free of them before it ended.
///
/// With `pool_is_tight` (fewer worker IDs than clients), a client whose
/// joins found every ID held waited for the others: its recovery starts at
/// the last such answer ([`Recovery::waited_for_an_id`]).
pub fn liveness(
    histories: &[ClientHistory],
    heals: &[Heal],
    windows: &[FaultWindow],
    lab_of: impl Fn(&str) -> Option<usize>,
    horizon: Duration,
    bound: Duration,
    pool_is_tight: bool,
) -> Vec<Recovery> {
    let horizon = u64::try_from(horizon.as_nanos()).unwrap_or(u64::MAX);
    let mut out = Vec::new();
    for heal in heals {
        for history in histories {
            let lab = lab_of(&history.client);
            if lab != Some(heal.lab) {
                continue;
            }
            let (Some(start), Some(end)) = (first_instant(history), last_instant(history)) else {
                continue;
            };
            if start > heal.at || end < heal.at + horizon {
                continue;
            }
            let healed = format!("{:?}", heal.fault);
            let touching: Vec<FaultWindow> = windows
                .iter()
                .filter(|w| w.touches(&history.client, lab))
                .cloned()
                .collect();
            // The healed fault's own window ends a moment after its heal.
            let held_until = touching
                .iter()
                .filter(|w| w.kind != healed && w.began <= heal.at && w.ended > heal.at)
                .map(|w| w.ended)
                .max();
            let first = history.events.iter().find_map(|event| match event {
                Event::Ids { t0, lease, .. } if *t0 >= heal.at => Some((*t0, *lease)),
                _ => None,
            });
            let free = held_until.unwrap_or(heal.at);
            let until = first.map_or(end, |(t0, _)| t0);
            let waited_until = history
                .events
                .iter()
                .filter_map(|event| match event {
                    Event::JoinFailed {
                        at,
                        pool_full: true,
                        ..
                    } if pool_is_tight && (free..=until).contains(at) => Some(*at),
                    _ => None,
                })
                .max();
            let since = waited_until.unwrap_or(free);
            let after = first.map(|(t0, _)| Duration::from_nanos(t0.saturating_sub(since)));
            let next_fault = touching
                .iter()
                .filter(|w| w.began > heal.at && w.ended > since)
                .map(|w| w.began.max(since) - since)
                .min()
                .map(Duration::from_nanos);
            let judged = crate::recovery::judged(after, next_fault, bound);
            let stuck = after.is_none() && quiet_stretch(&touching, since, end, bound);
            let from_heal = |at: u64| Duration::from_nanos(at - heal.at);
            out.push(Recovery {
                client: history.client.clone(),
                heal: *heal,
                after,
                held: held_until.map(from_heal),
                rejoined: first.and_then(|(_, lease)| rejoin_of(history, lease, since)),
                next_fault,
                waited_for_an_id: waited_until.map(from_heal),
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
    let held = recoveries.iter().filter(|r| r.held.is_some()).count();
    if held > 0 {
        lines[0].push_str(&format!(
            "; held by another fault at the heal, judged from its end: {held}"
        ));
    }
    let waited = recoveries
        .iter()
        .filter(|r| r.waited_for_an_id.is_some())
        .count();
    if waited > 0 {
        lines[0].push_str(&format!(
            "; waited for a free worker ID (a pool smaller than the clients), judged from \
             the last refusal: {waited}"
        ));
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
        let from = match (r.waited_for_an_id, r.held) {
            (Some(waited), _) => format!(
                "the last answer that every ID was held, {:.2} s after the heal",
                waited.as_secs_f64()
            ),
            (None, Some(held)) => format!(
                "the end of the fault that held it, {:.2} s after the heal",
                held.as_secs_f64()
            ),
            (None, None) => "the heal".to_string(),
        };
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
                    "its lease lost, acquired again {:.2} s after {from}, joined {:.2} s \
                     after it (the join waits for the clock to pass the worker ID's \
                     watermark); joins failed since: [{}]",
                    acquired.as_secs_f64(),
                    joined.as_secs_f64(),
                    failed.join(", ")
                )
            }
            None => "on the lease it held through the fault".to_string(),
        };
        lines.push(format!(
            "  the worst: {} after {:?}, issued {:.2} s after {from}, {how}",
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
mod tests;
