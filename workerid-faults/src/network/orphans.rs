//! Orphan grants: grants the store made that no client received.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::history::{ClientHistory, Event};
use crate::service_clients::poll_listings;
use crate::timeline::FaultWindow;

/// Watches the store for grants no client knows of: an acquire applied
/// whose answer was lost, and that its sender never found again, holds a
/// worker ID for a whole ttl with no one using it.
#[derive(Debug)]
pub struct GrantWatcher {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<BTreeMap<(u32, u64), (u64, u64)>>,
}

/// A live lease seen in the store whose grant no client received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Orphan {
    /// Its worker ID.
    pub worker_id: u32,
    /// Its fence.
    pub fence: u64,
    /// The first listing that showed it live (`CLOCK_MONOTONIC` ns).
    pub first_seen: u64,
    /// The last listing that showed it live.
    pub last_seen: u64,
    /// Whether it appeared outside every fault, or was still live longer
    /// after its fault than its requester needs to learn that the link
    /// works again (see [`GrantWatcher::finish`]): a requester that could
    /// have asked for it again and did not get it. One that appeared
    /// within a fault and expired before its requester could hear back had
    /// no one who could learn of it.
    pub outlived_its_fault: bool,
}

impl GrantWatcher {
    /// Lists `namespace` at `url` (from outside the labs) every 100 ms,
    /// noting every live lease's worker ID and fence, until
    /// [`finish`](Self::finish).
    pub fn start(url: String, namespace: String, max_worker_id: u32) -> GrantWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // (worker ID, fence) -> when first and last seen live.
            let mut seen: BTreeMap<(u32, u64), (u64, u64)> = BTreeMap::new();
            let watched = (url.as_str(), namespace.as_str(), max_worker_id);
            poll_listings("the grant watcher", watched, &stopped, |_, at, listing| {
                for lease in listing.live() {
                    seen.entry((lease.id.get(), lease.fence))
                        .and_modify(|(_, last)| *last = at)
                        .or_insert((at, at));
                }
            });
            seen
        });
        GrantWatcher { stop, thread }
    }

    /// Stops watching; returns every live lease seen that no client's
    /// history has a grant of, judged against the run's fault `windows`;
    /// those first seen at or after `clients_until` (when the clients were
    /// told to finish: a client may end with an acquire unanswered) are
    /// left out. `grace` is how long after a heal a requester may take to
    /// hear back: an acquire sent into the fault is answered or times out
    /// up to one request timeout after the heal, and the client pauses
    /// before it sends the acquire that would adopt the grant.
    pub fn finish(
        self,
        histories: &[ClientHistory],
        windows: &[FaultWindow],
        clients_until: u64,
        grace: Duration,
    ) -> Vec<Orphan> {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().unwrap_or_default();
        let known: BTreeSet<(u32, u64)> = histories
            .iter()
            .flat_map(|h| &h.events)
            .filter_map(|event| match event {
                Event::Grant {
                    worker_id, fence, ..
                }
                | Event::Acquired {
                    worker_id, fence, ..
                } => Some((*worker_id, *fence)),
                _ => None,
            })
            .collect();
        orphans_among(
            seen,
            &known,
            windows,
            clients_until,
            crate::nemesis::nanos(grace),
        )
    }
}

/// The leases `seen` live (first and last seen) whose grant is not among
/// the `known` ones, judged against the fault `windows` and the `grace`
/// (ns) after each; those first seen at or after `clients_until` left out.
fn orphans_among(
    seen: BTreeMap<(u32, u64), (u64, u64)>,
    known: &BTreeSet<(u32, u64)>,
    windows: &[FaultWindow],
    clients_until: u64,
    grace: u64,
) -> Vec<Orphan> {
    seen.into_iter()
        .filter(|(grant, (first, _))| !known.contains(grant) && *first < clients_until)
        .map(|((worker_id, fence), (first_seen, last_seen))| {
            let within_one_fault = windows
                .iter()
                .any(|w| w.began <= first_seen && last_seen < w.ended.saturating_add(grace));
            tracing::warn!(
                "orphan grant: worker ID {worker_id}, fence {fence}, live from {first_seen} \
                 to {last_seen}{}",
                if within_one_fault {
                    " (within one fault and its grace)"
                } else {
                    " (outlived its fault)"
                }
            );
            Orphan {
                worker_id,
                fence,
                first_seen,
                last_seen,
                outlived_its_fault: !within_one_fault,
            }
        })
        .collect()
}

/// The orphans as the run's summary gives them.
pub fn summarize_orphans(orphans: &[Orphan]) -> String {
    let outlived: Vec<(u32, u64)> = orphans
        .iter()
        .filter(|o| o.outlived_its_fault)
        .map(|o| (o.worker_id, o.fence))
        .collect();
    format!(
        "orphan grants: {} ({} appeared within the fault that lost their answer and expired \
         before their requester could hear back; outlived it (worker ID, fence): {outlived:?})",
        orphans.len(),
        orphans.len() - outlived.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(began: u64, ended: u64) -> FaultWindow {
        FaultWindow {
            kind: "DropReplies".into(),
            began,
            ended,
            touched: crate::timeline::Touched::Lab(0),
        }
    }

    #[test]
    fn an_orphan_is_judged_by_the_fault_it_appeared_in() {
        let seen = BTreeMap::from([
            ((0, 1), (100, 150)), // received by a client
            ((1, 1), (110, 190)), // appeared and expired within the fault
            ((2, 1), (120, 205)), // live after the heal at 200, within the grace
            ((3, 1), (120, 210)), // live past the grace
            ((5, 1), (300, 320)), // outside every fault
            ((4, 1), (900, 950)), // after the clients were told to finish
        ]);
        let known = BTreeSet::from([(0, 1)]);
        let orphans = orphans_among(seen, &known, &[window(100, 200)], 900, 10);
        let judged: Vec<(u32, bool)> = orphans
            .iter()
            .map(|o| (o.worker_id, o.outlived_its_fault))
            .collect();
        assert_eq!(judged, vec![(1, false), (2, false), (3, true), (5, true)]);
        assert!(summarize_orphans(&orphans)
            .contains("outlived it (worker ID, fence): [(3, 1), (5, 1)]"));
    }
}
