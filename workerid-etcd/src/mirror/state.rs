//! What a mirror knows of a namespace, and the rules that change it: the
//! pure part of the mirror (no etcd), so every rule is unit-tested.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Added to every quarantine, for the rates of two machines' clocks and the
/// time a holder's answer takes to reach it.
pub(crate) const QUARANTINE_MARGIN: Duration = Duration::from_millis(250);

/// An ID acquire may try, with the mod revision its `ownership/` record must
/// still have (0: no record) for the take to be safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub id: u32,
    pub record: i64,
    /// The mirror's revision when it offered the ID.
    pub as_of: i64,
}

/// An `ownership/` record as read from etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordRead {
    pub id: u32,
    /// Its mod revision.
    pub revision: i64,
    /// The ttl of a grant's record (`held <ttl>`); None for an operator's
    /// marker (`forced`), or any other value, which is taken as a release.
    pub ttl_secs: Option<u32>,
}

/// A namespace's owners and ownership records at one revision.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// The IDs whose `owner/` key exists.
    pub held: Vec<u32>,
    /// Every `ownership/` record.
    pub records: Vec<RecordRead>,
    pub revision: i64,
}

/// One change a watch delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// `owner/<id>` written (`put`) or deleted at `revision`.
    Owner { id: u32, revision: i64, put: bool },
    /// `ownership/<id>` written at `revision` (see [`RecordRead::ttl_secs`]).
    Record(RecordRead),
    /// `ownership/<id>` deleted at `revision`: a release.
    RecordDeleted { id: u32, revision: i64 },
}

impl Change {
    fn id_and_revision(&self) -> (u32, i64) {
        match *self {
            Change::Owner { id, revision, .. } | Change::RecordDeleted { id, revision } => {
                (id, revision)
            }
            Change::Record(read) => (read.id, read.revision),
        }
    }
}

/// What this process knows of one ID's `ownership/` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    revision: i64,
    ttl_secs: Option<u32>,
    /// For a grant's record whose owner was seen gone: when its quarantine
    /// ends. Kept once served, so a later scan of the same expiry does not
    /// quarantine it again.
    free_from: Option<Instant>,
}

/// An ID whose owner was seen deleted without a release in the same
/// revision, before its record was read: not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unresolved {
    seen: Instant,
    deleted: i64,
}

fn quarantine_end(seen: Instant, ttl_secs: u32) -> Instant {
    seen + Duration::from_secs(u64::from(ttl_secs)) + QUARANTINE_MARGIN
}

/// The mirror's state.
#[derive(Debug)]
pub(crate) struct State {
    max_worker_id: u32,
    /// Bit `id` is set when `owner/<id>` is believed to exist.
    held: Vec<u64>,
    /// The etcd revision the mirror reflects (0: never loaded).
    pub revision: i64,
    /// Whether a watch is delivering every deletion after `revision`.
    pub watching: bool,
    /// The `ownership/` records known; an ID with none has no record.
    records: HashMap<u32, Record>,
    unresolved: HashMap<u32, Unresolved>,
    /// The revision of each ID's last owner deletion the mirror applied.
    deleted: HashMap<u32, i64>,
    /// The revision of the last snapshot installed.
    installed: i64,
}

impl State {
    pub(crate) fn new(max_worker_id: u32) -> State {
        State {
            max_worker_id,
            held: vec![0; (max_worker_id as usize + 1).div_ceil(64)],
            revision: 0,
            watching: false,
            records: HashMap::new(),
            unresolved: HashMap::new(),
            deleted: HashMap::new(),
            installed: 0,
        }
    }

    /// Replaces the contents with `snapshot` (taken before `now`), unless the
    /// mirror already reflects a later revision. A grant's record whose owner
    /// is gone expired: quarantined from when this process saw the owner go
    /// (an unresolved expiry of that grant), or else from now, unless that
    /// expiry is quarantined already.
    pub(crate) fn install(&mut self, snapshot: &Snapshot, now: Instant) {
        if snapshot.revision < self.revision {
            return;
        }
        self.held.fill(0);
        for &id in &snapshot.held {
            set(&mut self.held, id, true);
        }
        let unresolved = std::mem::take(&mut self.unresolved);
        let known = std::mem::take(&mut self.records);
        for read in snapshot
            .records
            .iter()
            .filter(|r| r.id <= self.max_worker_id)
        {
            let free_from = match read.ttl_secs {
                Some(ttl) if !get(&self.held, read.id) => {
                    let same = known
                        .get(&read.id)
                        .filter(|r| r.revision == read.revision)
                        .and_then(|r| r.free_from);
                    let seen = unresolved
                        .get(&read.id)
                        .filter(|u| read.revision < u.deleted)
                        .map_or(now, |u| u.seen);
                    Some(same.unwrap_or_else(|| quarantine_end(seen, ttl)))
                }
                _ => None,
            };
            let record = Record {
                revision: read.revision,
                ttl_secs: read.ttl_secs,
                free_from,
            };
            self.records.insert(read.id, record);
        }
        self.revision = snapshot.revision;
        self.installed = snapshot.revision;
    }

    /// Marks `id` held (this process took it).
    pub(crate) fn mark_held(&mut self, id: u32) {
        set(&mut self.held, id, true);
    }

    /// Marks held the candidates a transaction found taken (or granted
    /// since they were judged free), except those the mirror has learnt
    /// more about since it offered them (a scan, or the owner's deletion):
    /// marking those would hide a free ID until the next scan.
    pub(crate) fn mark_taken(&mut self, candidates: &[Candidate]) {
        for c in candidates {
            let newer =
                self.installed > c.as_of || self.deleted.get(&c.id).is_some_and(|&at| at > c.as_of);
            if !newer {
                set(&mut self.held, c.id, true);
            }
        }
    }

    /// The record revision a take of `id` must compare, if the mirror
    /// believes it free: no owner, not unresolved, and no record, a
    /// release's record, or a grant's whose quarantine is over.
    fn offered(&self, id: u32, now: Instant) -> Option<i64> {
        if get(&self.held, id) || self.unresolved.contains_key(&id) {
            return None;
        }
        match self.records.get(&id) {
            None => Some(0),
            Some(r) if r.ttl_secs.is_none() || r.free_from.is_some_and(|end| end <= now) => {
                Some(r.revision)
            }
            Some(_) => None,
        }
    }

    /// Up to `n` candidates, from `start` to the end of the pool, then from 0.
    pub(crate) fn candidates(&self, n: usize, start: u32, now: Instant) -> Vec<Candidate> {
        let total = u64::from(self.max_worker_id) + 1;
        let start = u64::from(start).min(total - 1);
        let mut found = Vec::with_capacity(n.min(total as usize));
        for (from, to) in [(start, total), (0, start)] {
            let mut id = from;
            while id < to && found.len() < n {
                if id % 64 == 0 && self.held[(id / 64) as usize] == u64::MAX {
                    id += 64;
                    continue;
                }
                if let Some(record) = self.offered(id as u32, now) {
                    found.push(Candidate {
                        id: id as u32,
                        record,
                        as_of: self.revision,
                    });
                }
                id += 1;
            }
        }
        found
    }

    /// Applies the changes of one watch answer (received at `now`; its
    /// events go up to `revision`, which the mirror then reflects: not the
    /// answer's header revision, since etcd splits a long catch-up into
    /// several answers that all carry the current revision). An owner deleted without a release in the same revision (a
    /// release deletes `ownership/<id>` in the transaction that deletes the
    /// owner, an operator's force release writes `forced`) is unresolved
    /// until its record is read: returns those IDs with the revision of the
    /// deletion, for [`State::settle`].
    pub(crate) fn apply(
        &mut self,
        changes: &[Change],
        revision: i64,
        now: Instant,
    ) -> Vec<(u32, i64)> {
        let mut gone = Vec::new();
        let mut released = Vec::new();
        for change in changes {
            let (id, at) = change.id_and_revision();
            if at <= self.revision || id > self.max_worker_id {
                continue;
            }
            match *change {
                Change::Owner { put: true, .. } => {
                    set(&mut self.held, id, true);
                    self.unresolved.remove(&id);
                }
                Change::Owner { put: false, .. } => {
                    set(&mut self.held, id, false);
                    self.deleted.insert(id, at);
                    gone.push((id, at));
                }
                Change::Record(read) => {
                    if read.ttl_secs.is_none() {
                        released.push((id, at));
                    }
                    let record = Record {
                        revision: at,
                        ttl_secs: read.ttl_secs,
                        free_from: None,
                    };
                    self.records.insert(id, record);
                }
                Change::RecordDeleted { .. } => {
                    self.records.remove(&id);
                    released.push((id, at));
                }
            }
        }
        gone.retain(|&(id, at)| !get(&self.held, id) && !released.contains(&(id, at)));
        for &(id, deleted) in &gone {
            self.unresolved
                .insert(id, Unresolved { seen: now, deleted });
        }
        self.revision = self.revision.max(revision);
        gone
    }

    /// Settles the unresolved expiry of `id` (its owner deleted at revision
    /// `deleted`) with its `ownership/` record read after it (None: there is
    /// none). A grant's record older than the deletion is the grant that
    /// expired: quarantined from when the deletion was seen. A newer one is
    /// a later grant (believed held) or release.
    pub(crate) fn settle(&mut self, id: u32, deleted: i64, record: Option<RecordRead>) {
        let Some(unresolved) = self.unresolved.get(&id).copied() else {
            return;
        };
        if unresolved.deleted != deleted {
            return;
        }
        self.unresolved.remove(&id);
        let Some(read) = record else {
            self.records.remove(&id);
            return;
        };
        let expired = read.revision < deleted;
        if read.ttl_secs.is_some() && !expired {
            set(&mut self.held, id, true);
        }
        let record = Record {
            revision: read.revision,
            ttl_secs: read.ttl_secs,
            free_from: read
                .ttl_secs
                .filter(|_| expired)
                .map(|ttl| quarantine_end(unresolved.seen, ttl)),
        };
        self.records.insert(id, record);
    }
}

fn get(bits: &[u64], id: u32) -> bool {
    bits.get((id / 64) as usize)
        .is_some_and(|w| w & (1 << (id % 64)) != 0)
}

fn set(bits: &mut [u64], id: u32, held: bool) {
    let (word, bit) = ((id / 64) as usize, id % 64);
    if let Some(w) = bits.get_mut(word) {
        if held {
            *w |= 1 << bit;
        } else {
            *w &= !(1 << bit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(id: u32, revision: i64, ttl_secs: Option<u32>) -> RecordRead {
        RecordRead {
            id,
            revision,
            ttl_secs,
        }
    }

    fn snapshot(held: &[u32], records: &[RecordRead], revision: i64) -> Snapshot {
        Snapshot {
            held: held.to_vec(),
            records: records.to_vec(),
            revision,
        }
    }

    /// Every candidate (ID, expected record revision), in ID order.
    fn offered(state: &State, now: Instant) -> Vec<(u32, i64)> {
        let all = state.candidates(usize::MAX, 0, now);
        all.into_iter().map(|c| (c.id, c.record)).collect()
    }

    fn ids(state: &State, now: Instant) -> Vec<u32> {
        offered(state, now).into_iter().map(|(id, _)| id).collect()
    }

    fn owner_deleted(id: u32, revision: i64) -> Change {
        Change::Owner {
            id,
            revision,
            put: false,
        }
    }

    #[test]
    fn candidates_are_the_free_ids_from_any_start() {
        let mut s = State::new(129);
        let held: Vec<u32> = (0..=129).filter(|id| id % 7 != 0).collect();
        s.install(&snapshot(&held, &[], 5), Instant::now());
        let free: Vec<u32> = (0..=129).filter(|id| id % 7 == 0).collect();
        assert_eq!(ids(&s, Instant::now()), free);
        let from_100: Vec<u32> = s
            .candidates(3, 100, Instant::now())
            .iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(from_100, vec![105, 112, 119]);
        free.into_iter().for_each(|id| s.mark_held(id));
        assert!(s.candidates(8, 0, Instant::now()).is_empty());
    }

    #[test]
    fn an_older_snapshot_does_not_replace_a_newer_one() {
        let mut s = State::new(3);
        let now = Instant::now();
        s.install(&snapshot(&[0, 1, 2, 3], &[], 10), now);
        s.install(&snapshot(&[], &[], 9), now);
        assert!(ids(&s, now).is_empty());
        s.install(&snapshot(&[0, 1], &[], 11), now);
        assert_eq!(ids(&s, now), vec![2, 3]);
    }

    #[test]
    fn an_expired_grant_is_quarantined_for_its_ttl_and_then_offered_with_its_record() {
        let mut s = State::new(3);
        let now = Instant::now();
        // 0 is held, 1 expired (a grant's record, no owner), 2 was released
        // (a record that is no grant's), 3 has no record.
        let records = [read(0, 7, Some(5)), read(1, 8, Some(5)), read(2, 9, None)];
        s.install(&snapshot(&[0], &records, 10), now);
        assert_eq!(offered(&s, now), vec![(2, 9), (3, 0)]);
        let end = now + Duration::from_secs(5) + QUARANTINE_MARGIN;
        assert_eq!(
            offered(&s, end - Duration::from_millis(1)),
            vec![(2, 9), (3, 0)]
        );
        assert_eq!(offered(&s, end), vec![(1, 8), (2, 9), (3, 0)]);
        // A later scan of the same expiry, once served, does not start it again.
        s.install(&snapshot(&[0], &records, 11), end);
        assert_eq!(offered(&s, end), vec![(1, 8), (2, 9), (3, 0)]);
        // A new grant of 1 that expired too is a new quarantine.
        let regranted = [read(0, 7, Some(5)), read(1, 12, Some(2)), read(2, 9, None)];
        s.install(&snapshot(&[0], &regranted, 13), end);
        assert_eq!(ids(&s, end), vec![2, 3]);
        let second = end + Duration::from_secs(2) + QUARANTINE_MARGIN;
        assert_eq!(ids(&s, second), vec![1, 2, 3]);
    }

    #[test]
    fn a_release_frees_an_id_at_once_and_an_expiry_is_unresolved() {
        let mut s = State::new(3);
        let now = Instant::now();
        s.install(&snapshot(&[0, 1, 2, 3], &[], 10), now);
        let changes = [
            // 0 released: the owner and its record in one revision.
            owner_deleted(0, 11),
            Change::RecordDeleted {
                id: 0,
                revision: 11,
            },
            // 1 expired: the owner alone.
            owner_deleted(1, 12),
            // 2 force-released by an operator: `forced` is a put, which the
            // watch does not deliver, so it looks like an expiry at first.
            owner_deleted(2, 13),
        ];
        assert_eq!(s.apply(&changes, 13, now), vec![(1, 12), (2, 13)]);
        assert_eq!(offered(&s, now), vec![(0, 0)]);
        // One read of the record settles it: free at once.
        s.settle(2, 13, Some(read(2, 13, None)));
        assert_eq!(offered(&s, now), vec![(0, 0), (2, 13)]);
        assert_eq!(s.revision, 13);
        // Changes the mirror reflects already are ignored.
        s.apply(&[owner_deleted(3, 9)], 14, now);
        assert_eq!(ids(&s, now), vec![0, 2]);
    }

    #[test]
    fn a_release_and_a_later_expiry_of_one_id_in_one_answer_are_told_apart() {
        let mut s = State::new(1);
        let now = Instant::now();
        s.install(&snapshot(&[0, 1], &[read(0, 3, Some(5))], 10), now);
        // Released at 11, granted again at 12 (a put: unseen), expired at 13.
        let changes = [
            owner_deleted(0, 11),
            Change::RecordDeleted {
                id: 0,
                revision: 11,
            },
            owner_deleted(0, 13),
        ];
        assert_eq!(s.apply(&changes, 13, now), vec![(0, 13)]);
        assert!(ids(&s, now).is_empty(), "an unresolved expiry was offered");
        s.settle(0, 13, Some(read(0, 12, Some(4))));
        let end = now + Duration::from_secs(4) + QUARANTINE_MARGIN;
        assert!(ids(&s, end - Duration::from_millis(1)).is_empty());
        assert_eq!(offered(&s, end), vec![(0, 12)]);
    }

    #[test]
    fn settling_an_expiry_reads_which_grant_it_was() {
        let mut s = State::new(4);
        let now = Instant::now();
        s.install(&snapshot(&[0, 1, 2, 3, 4], &[], 10), now);
        let seen = now - Duration::from_secs(2);
        let changes: Vec<Change> = (0..4)
            .map(|id| owner_deleted(id, 20 + i64::from(id)))
            .collect();
        assert_eq!(s.apply(&changes, 23, seen).len(), 4);
        // 0: the record of the grant that expired (older than the deletion):
        // quarantined from when the deletion was seen.
        s.settle(0, 20, Some(read(0, 15, Some(5))));
        // 1: a record written after the deletion: a later grant, held.
        s.settle(1, 21, Some(read(1, 30, Some(5))));
        // 2: no record: released since.
        s.settle(2, 22, None);
        // 3: a settlement for another deletion than the pending one is
        // ignored; its own settles it (a record that is no grant's: released).
        s.settle(3, 99, None);
        assert_eq!(offered(&s, now), vec![(2, 0)]);
        s.settle(3, 23, Some(read(3, 23, None)));
        assert_eq!(offered(&s, now), vec![(2, 0), (3, 23)]);
        let end = seen + Duration::from_secs(5) + QUARANTINE_MARGIN;
        assert_eq!(offered(&s, end), vec![(0, 15), (2, 0), (3, 23)]);
    }

    #[test]
    fn a_scan_settles_every_unresolved_expiry() {
        let mut s = State::new(3);
        let now = Instant::now();
        s.install(&snapshot(&[1, 2, 3], &[], 10), now);
        let seen = now - Duration::from_secs(3);
        let changes = [
            owner_deleted(1, 20),
            owner_deleted(2, 21),
            owner_deleted(3, 22),
        ];
        s.apply(&changes, 22, seen);
        // 1 expired (its grant at 12: quarantined from when it was seen), 2
        // is held again, 3 was released (no record).
        let records = [read(1, 12, Some(4)), read(2, 25, Some(4))];
        s.install(&snapshot(&[2], &records, 30), now);
        assert!(s.unresolved.is_empty());
        assert_eq!(offered(&s, now), vec![(0, 0), (3, 0)]);
        let end = seen + Duration::from_secs(4) + QUARANTINE_MARGIN;
        assert_eq!(offered(&s, end), vec![(0, 0), (1, 12), (3, 0)]);
    }

    #[test]
    fn a_candidate_learnt_about_since_it_was_offered_is_not_marked_taken() {
        let mut s = State::new(2);
        let now = Instant::now();
        s.install(&snapshot(&[], &[], 10), now);
        let offer = s.candidates(3, 0, now);
        assert!(offer.iter().all(|c| c.as_of == 10));
        // 1's owner (a grant this mirror did not see) is deleted and settled
        // before the lost round is handled: 1 stays offered.
        s.apply(&[owner_deleted(1, 12)], 12, now);
        s.settle(1, 12, None);
        s.mark_taken(&offer);
        assert_eq!(ids(&s, now), vec![1]);
        // A lost round with nothing learnt since marks its candidates held.
        let offer = s.candidates(3, 0, now);
        s.mark_taken(&offer);
        assert!(ids(&s, now).is_empty());
        // A scan after the offer supersedes what the lost round saw.
        s.install(&snapshot(&[], &[], 20), now);
        let offer = s.candidates(3, 0, now);
        s.install(&snapshot(&[0], &[], 21), now);
        s.mark_taken(&offer);
        assert_eq!(ids(&s, now), vec![1, 2]);
    }
}
