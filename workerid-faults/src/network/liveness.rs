//! Liveness after heals: how soon each client issued again, and why the
//! slowest took as long as it did.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::Heal;
use crate::history::{ClientHistory, Event};
use crate::nemesis::Fault;

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
/// `lab_of` names each client's lab; clients that the nemesis stopped,
/// killed or that ended within the horizon are not judged (their silence is
/// the nemesis's, not the network's).
pub fn liveness(
    histories: &[ClientHistory],
    heals: &[Heal],
    lab_of: impl Fn(&str) -> Option<usize>,
    horizon: Duration,
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
            out.push(Recovery {
                client: history.client.clone(),
                heal: *heal,
                after: first.map(|(t0, _)| Duration::from_nanos(t0 - heal.at)),
                rejoined: first.and_then(|(_, lease)| rejoin_of(history, lease, heal.at)),
            });
        }
    }
    out
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

/// The recoveries as a distribution (count, median, p90, worst), overall
/// and per fault, and the clients that never issued again.
pub fn summarize(recoveries: &[Recovery]) -> String {
    let mut lines = vec![distribution("liveness after heals", recoveries)];
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
    let mut times: Vec<Duration> = recoveries.iter().filter_map(|r| r.after).collect();
    times.sort_unstable();
    let stuck: Vec<String> = recoveries
        .iter()
        .filter(|r| r.after.is_none())
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
