//! The checker: a pure function from the clients' histories to a [`Report`]
//! of safety violations.
//!
//! Each lease is judged on what its holder recorded (see [`history`](crate::history)):
//!
//! | rule | violation |
//! | --- | --- |
//! | two holders of one worker ID never issue at overlapping times: the issuing interval of a lease runs from the instant its join returned (the grant happened before) to the instant just before its last recorded ID was asked for (that ID was issued after); an earlier holder on a ticking clock is held to the timestamp rules instead (its IDs below the next holder's) | [`Violation::Overlap`] |
//! | no ID is issued twice, by anyone | [`Violation::DuplicateId`] |
//! | no ID is issued at or after the lease's local deadline (the deadline read after its batch: deadlines only move forward while a lease is held): fail closed by real time, the rule of the default clock; a client on a ticking clock keeps the next rule instead (fail closed by timestamp) | [`Violation::AfterDeadline`] |
//! | no ID's timestamp exceeds the largest window the holder had reserved in the store as its watermark | [`Violation::BeyondWindow`] |
//! | every ID carries its lease's worker ID | [`Violation::WrongWorkerId`] |
//! | the IDs of a lease rise in the order they were issued | [`Violation::NotRising`] |
//! | the IDs of a worker ID rise across its holders, ordered by fence, and ordered by grant where the instants prove the order (a join that returned before the other was sent) | [`Violation::WentBack`] |
//! | fences rise with grants: a lease granted (join returned) before another was sent has the lower fence; no two grants share a fence | [`Violation::FenceNotRising`] |
//! | IDs belong to a recorded grant | [`Violation::Orphan`] |
//!
//! Every rule holds for a correct worker on a correct store, whatever the
//! scheduling: each is stated so that the instants recorded around an event
//! bound it from the safe side. A store that keeps nothing across a restart
//! (Redis without persistence) cannot keep the rules that compare two
//! holders; with [`CheckOptions::forgetful_restarts`] such a violation is
//! *excused* (listed apart) when a restart happened between the two grants,
//! and only then.

use std::collections::{HashMap, HashSet};
use std::fmt;

use workerid::snowflake::Layout;

use crate::history::{ClientHistory, Event};

/// What the checker is told besides the histories.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The layout the clients used (to read worker IDs and timestamps).
    pub layout: Layout,
    /// The instants at which a store that keeps nothing (Redis without
    /// persistence) was killed. Empty for durable stores.
    pub forgetful_restarts: Vec<u64>,
}

impl CheckOptions {
    /// For a durable store: nothing is excused.
    pub fn new(layout: Layout) -> CheckOptions {
        CheckOptions {
            layout,
            forgetful_restarts: Vec::new(),
        }
    }
}

/// One lease, as a violation names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRef {
    /// The client that held it.
    pub client: String,
    /// The client's number for it.
    pub lease: u32,
    /// The worker ID.
    pub worker_id: u32,
    /// The fence of its grant.
    pub fence: u64,
    /// The instant just before its join.
    pub sent: u64,
    /// The instant its join returned.
    pub granted: u64,
}

impl fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}#{} (worker ID {}, fence {})",
            self.client, self.lease, self.worker_id, self.fence
        )
    }
}

/// A broken safety rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Two holders of one worker ID issued IDs at overlapping times.
    Overlap {
        /// The lease granted first.
        first: LeaseRef,
        /// The other one.
        second: LeaseRef,
        /// How long the intervals overlap, in nanoseconds.
        overlap_ns: u64,
    },
    /// One ID issued twice.
    DuplicateId {
        /// The ID.
        id: u64,
        /// The lease that issued it first (in history order).
        first: LeaseRef,
        /// The lease that issued it again.
        second: LeaseRef,
    },
    /// An ID issued at or after the lease's local deadline.
    AfterDeadline {
        /// The lease.
        lease: LeaseRef,
        /// The instant before which the ID was surely not issued.
        issued_at: u64,
        /// The deadline.
        deadline: u64,
    },
    /// An ID above the window its holder had reserved in the store.
    BeyondWindow {
        /// The lease.
        lease: LeaseRef,
        /// The ID.
        id: u64,
        /// Its timestamp (layout units).
        timestamp: u64,
        /// The largest window end the holder had reserved.
        window_end: u64,
    },
    /// An ID whose worker-ID field is not the lease's.
    WrongWorkerId {
        /// The lease.
        lease: LeaseRef,
        /// The ID.
        id: u64,
        /// The worker ID in it.
        found: u32,
    },
    /// An ID not above the one issued before it under the same lease.
    NotRising {
        /// The lease.
        lease: LeaseRef,
        /// The ID.
        id: u64,
        /// The ID before it.
        previous: u64,
    },
    /// A later holder (higher fence) of a worker ID issued an ID not above an
    /// earlier holder's.
    WentBack {
        /// The earlier holder with the highest ID.
        earlier: LeaseRef,
        /// The later holder.
        later: LeaseRef,
        /// The earlier holder's highest ID.
        earlier_max: u64,
        /// The later holder's lowest ID.
        later_min: u64,
    },
    /// Fences that do not rise with grants.
    FenceNotRising {
        /// The lease granted first.
        earlier: LeaseRef,
        /// The lease granted after it, with a fence not above it.
        later: LeaseRef,
    },
    /// IDs under a lease with no recorded grant (a broken history).
    Orphan {
        /// The client.
        client: String,
        /// The lease number.
        lease: u32,
    },
}

impl Violation {
    /// The rule's short name: `overlap`, `duplicate-id`, `after-deadline`,
    /// `beyond-window`, `wrong-worker-id`, `not-rising`, `went-back`,
    /// `fence-not-rising`, `orphan`.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::Overlap { .. } => "overlap",
            Violation::DuplicateId { .. } => "duplicate-id",
            Violation::AfterDeadline { .. } => "after-deadline",
            Violation::BeyondWindow { .. } => "beyond-window",
            Violation::WrongWorkerId { .. } => "wrong-worker-id",
            Violation::NotRising { .. } => "not-rising",
            Violation::WentBack { .. } => "went-back",
            Violation::FenceNotRising { .. } => "fence-not-rising",
            Violation::Orphan { .. } => "orphan",
        }
    }

    /// The two leases a rule between holders names.
    fn pair(&self) -> Option<(&LeaseRef, &LeaseRef)> {
        match self {
            Violation::Overlap { first, second, .. }
            | Violation::DuplicateId { first, second, .. } => Some((first, second)),
            Violation::WentBack { earlier, later, .. }
            | Violation::FenceNotRising { earlier, later } => Some((earlier, later)),
            _ => None,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Overlap { first, second, overlap_ns } => write!(
                f,
                "overlap: {first} and {second} both issued IDs during {:.3} ms",
                *overlap_ns as f64 / 1e6
            ),
            Violation::DuplicateId { id, first, second } => {
                write!(f, "duplicate ID {id}: issued by {first} and by {second}")
            }
            Violation::AfterDeadline { lease, issued_at, deadline } => write!(
                f,
                "after deadline: {lease} issued an ID {:.3} ms after its local deadline",
                issued_at.saturating_sub(*deadline) as f64 / 1e6
            ),
            Violation::BeyondWindow { lease, id, timestamp, window_end } => write!(
                f,
                "beyond window: {lease} issued {id} with timestamp {timestamp} above its reserved window end {window_end}"
            ),
            Violation::WrongWorkerId { lease, id, found } => {
                write!(f, "wrong worker ID: {lease} issued {id}, which carries worker ID {found}")
            }
            Violation::NotRising { lease, id, previous } => {
                write!(f, "not rising: {lease} issued {id} after {previous}")
            }
            Violation::WentBack { earlier, later, earlier_max, later_min } => write!(
                f,
                "went back: {later} issued {later_min}, not above {earlier_max} of the earlier holder {earlier}"
            ),
            Violation::FenceNotRising { earlier, later } => write!(
                f,
                "fence not rising: {later} was granted after {earlier} without a higher fence"
            ),
            Violation::Orphan { client, lease } => {
                write!(f, "orphan: {client} recorded IDs under lease {lease} without a grant")
            }
        }
    }
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Client histories read.
    pub clients: usize,
    /// Leases (grants) recorded.
    pub leases: usize,
    /// Leases of a worker ID that someone held before (hand-overs).
    pub handovers: usize,
    /// IDs recorded.
    pub ids: usize,
    /// Broken rules (the first of each kind per lease, and each pair of
    /// leases once).
    pub violations: Vec<Violation>,
    /// Broken rules that a forgetful store restart excuses.
    pub excused: Vec<Violation>,
}

impl Report {
    /// Whether no rule was broken (excused ones aside).
    pub fn is_safe(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many violations of `kind` (see [`Violation::kind`]).
    pub fn count(&self, kind: &str) -> usize {
        self.violations.iter().filter(|v| v.kind() == kind).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} clients, {} leases ({} hand-overs), {} IDs: {} violations, {} excused",
            self.clients,
            self.leases,
            self.handovers,
            self.ids,
            self.violations.len(),
            self.excused.len()
        )?;
        for v in self.violations.iter().take(30) {
            writeln!(f, "  VIOLATION {v}")?;
        }
        for v in self.excused.iter().take(10) {
            writeln!(
                f,
                "  excused (a forgetful restart lies between the grants) {v}"
            )?;
        }
        Ok(())
    }
}

/// One lease with what its holder recorded.
struct Held<'a> {
    at: LeaseRef,
    /// Its holder makes IDs on a ticking clock: not judged by real time.
    ticking: bool,
    window_end: u64,
    batches: Vec<Batch<'a>>,
}

struct Batch<'a> {
    tl: u64,
    deadline: u64,
    window_end: u64,
    ids: &'a [u64],
}

impl Held<'_> {
    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.batches.iter().flat_map(|b| b.ids.iter().copied())
    }
    /// The issuing interval: join returned .. before the last recorded ID.
    fn interval(&self) -> Option<(u64, u64)> {
        let last = self.batches.iter().map(|b| b.tl).max()?;
        Some((self.at.granted, last))
    }
}

/// Checks the histories (see the module docs for the rules).
pub fn check(histories: &[ClientHistory], options: &CheckOptions) -> Report {
    let mut report = Report {
        clients: histories.len(),
        ..Report::default()
    };
    let mut found = Vec::new();
    let leases = collect(histories, &mut found);
    report.leases = leases.len();
    for held in &leases {
        check_lease(held, &options.layout, &mut found);
        report.ids += held.batches.iter().map(|b| b.ids.len()).sum::<usize>();
    }
    duplicates(&leases, &mut found);
    let mut by_worker: HashMap<u32, Vec<&Held>> = HashMap::new();
    for held in &leases {
        by_worker.entry(held.at.worker_id).or_default().push(held);
    }
    for group in by_worker.values() {
        report.handovers += group.len().saturating_sub(1);
        between_holders(group, &mut found);
    }
    for v in found {
        let excused = v.pair().is_some_and(|(a, b)| {
            let from = a.sent.min(b.sent);
            let to = a.granted.max(b.granted);
            options
                .forgetful_restarts
                .iter()
                .any(|k| *k > from && *k < to)
        });
        if excused {
            report.excused.push(v);
        } else {
            report.violations.push(v);
        }
    }
    report
}

fn collect<'a>(histories: &'a [ClientHistory], found: &mut Vec<Violation>) -> Vec<Held<'a>> {
    let mut leases = Vec::new();
    for history in histories {
        let mut mine: HashMap<u32, usize> = HashMap::new();
        let mut orphans = HashSet::new();
        let mut ticking = false;
        for event in &history.events {
            match event {
                Event::Start { ticking: t, .. } => ticking = *t,
                Event::Grant {
                    lease,
                    worker_id,
                    fence,
                    sent,
                    granted,
                    window_end,
                    ..
                } => {
                    mine.insert(*lease, leases.len());
                    leases.push(Held {
                        at: LeaseRef {
                            client: history.client.clone(),
                            lease: *lease,
                            worker_id: *worker_id,
                            fence: *fence,
                            sent: *sent,
                            granted: *granted,
                        },
                        ticking,
                        window_end: *window_end,
                        batches: Vec::new(),
                    });
                }
                Event::Ids {
                    lease,
                    tl,
                    deadline,
                    window_end,
                    ids,
                    ..
                } => match mine.get(lease) {
                    Some(i) => leases[*i].batches.push(Batch {
                        tl: *tl,
                        deadline: *deadline,
                        window_end: *window_end,
                        ids,
                    }),
                    None => {
                        if orphans.insert(*lease) {
                            found.push(Violation::Orphan {
                                client: history.client.clone(),
                                lease: *lease,
                            });
                        }
                    }
                },
                _ => {}
            }
        }
    }
    leases
}

/// The rules within one lease; the first violation of each kind only.
fn check_lease(held: &Held, layout: &Layout, found: &mut Vec<Violation>) {
    let mut seen: HashSet<&'static str> = HashSet::new();
    let mut push = |v: Violation, found: &mut Vec<Violation>| {
        if seen.insert(v.kind()) {
            found.push(v);
        }
    };
    let mut window = held.window_end;
    let mut previous: Option<u64> = None;
    for batch in &held.batches {
        if batch.tl >= batch.deadline && !held.ticking {
            push(
                Violation::AfterDeadline {
                    lease: held.at.clone(),
                    issued_at: batch.tl,
                    deadline: batch.deadline,
                },
                found,
            );
        }
        window = window.max(batch.window_end);
        for &id in batch.ids {
            let parts = layout.decompose(id);
            if parts.worker_id != held.at.worker_id {
                push(
                    Violation::WrongWorkerId {
                        lease: held.at.clone(),
                        id,
                        found: parts.worker_id,
                    },
                    found,
                );
            }
            if parts.timestamp > window {
                push(
                    Violation::BeyondWindow {
                        lease: held.at.clone(),
                        id,
                        timestamp: parts.timestamp,
                        window_end: window,
                    },
                    found,
                );
            }
            if let Some(previous) = previous.filter(|p| id <= *p) {
                push(
                    Violation::NotRising {
                        lease: held.at.clone(),
                        id,
                        previous,
                    },
                    found,
                );
            }
            previous = Some(id);
        }
    }
}

/// No ID twice across leases (within one, `NotRising` catches it); each pair
/// of leases reported once.
fn duplicates(leases: &[Held], found: &mut Vec<Violation>) {
    let mut owner: HashMap<u64, usize> = HashMap::new();
    let mut pairs = HashSet::new();
    for (i, held) in leases.iter().enumerate() {
        for id in held.ids() {
            match owner.get(&id) {
                Some(&j) if j != i => {
                    if pairs.insert((j, i)) {
                        found.push(Violation::DuplicateId {
                            id,
                            first: leases[j].at.clone(),
                            second: held.at.clone(),
                        });
                    }
                }
                Some(_) => {}
                None => {
                    owner.insert(id, i);
                }
            }
        }
    }
}

/// The rules between the holders of one worker ID.
fn between_holders(group: &[&Held], found: &mut Vec<Violation>) {
    // Overlapping issuing intervals.
    let mut intervals: Vec<(u64, u64, &Held)> = group
        .iter()
        .filter_map(|h| h.interval().map(|(a, b)| (a, b, *h)))
        .collect();
    intervals.sort_by_key(|(start, _, _)| *start);
    for (i, (_, end_a, a)) in intervals.iter().enumerate() {
        for (start_b, end_b, b) in &intervals[i + 1..] {
            // A holder on a ticking clock that was frozen issues, once
            // thawed and until its ticker runs, on the time stored before
            // the freeze: after its lease lapsed in real time, but with
            // timestamps below its reserved window, hence below the next
            // holder's. Its rule is by timestamp (went-back, duplicate,
            // beyond-window), not by real time.
            if start_b < end_a && !a.ticking {
                found.push(Violation::Overlap {
                    first: a.at.clone(),
                    second: b.at.clone(),
                    overlap_ns: (*end_a).min(*end_b).saturating_sub(*start_b),
                });
            }
        }
    }
    // Fences rise with grants.
    for a in group {
        for b in group {
            let before = a.at.granted < b.at.sent;
            let same = a.at.fence == b.at.fence && a.at.sent < b.at.sent;
            if (before && a.at.fence >= b.at.fence) || (!before && same) {
                found.push(Violation::FenceNotRising {
                    earlier: a.at.clone(),
                    later: b.at.clone(),
                });
            }
        }
    }
    // IDs rise across holders: in fence order, and in grant order where
    // the instants prove it (a fence that went back hides nothing).
    let mut by_fence: Vec<(&Held, u64, u64)> = group
        .iter()
        .filter_map(|h| Some((*h, h.ids().min()?, h.ids().max()?)))
        .collect();
    by_fence.sort_by_key(|(h, _, _)| (h.at.fence, h.at.granted));
    let mut reported = HashSet::new();
    let mut went_back = |earlier: &Held, later: &Held, earlier_max: u64, later_min: u64| {
        let key = (earlier.at.clone(), later.at.clone());
        if reported.insert((key.0.client.clone(), key.0.lease, key.1.client, key.1.lease)) {
            found.push(Violation::WentBack {
                earlier: key.0,
                later: later.at.clone(),
                earlier_max,
                later_min,
            });
        }
    };
    let mut top: Option<(&Held, u64)> = None;
    for (held, min, max) in &by_fence {
        if let Some((earlier, earlier_max)) = top {
            if *min <= earlier_max {
                went_back(earlier, held, earlier_max, *min);
            }
        }
        if top.is_none_or(|(_, m)| *max > m) {
            top = Some((held, *max));
        }
    }
    for (a, _, a_max) in &by_fence {
        for (b, b_min, _) in &by_fence {
            if a.at.granted < b.at.sent && b_min <= a_max {
                went_back(a, b, *a_max, *b_min);
            }
        }
    }
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;
