//! A tag's current segment, handed out lock-free: one atomic add per claim,
//! no reference count, no lock.
//!
//! One 64-bit word holds the segment's generation (top 16 bits) and the
//! offset of the next unclaimed ID (low 48 bits). A claim adds to the word;
//! the generation it read names the slot (one of four) where that segment's
//! first ID and length are. Installing the next segment writes the next slot
//! first and then swaps the word to (next generation, offset 0), so every
//! claim belongs to exactly one segment: the swap is atomic with the adds.
//! A slot is rewritten only at the fourth switch after; a claimer stalled that
//! long notices (the slot's sequence number has changed, as in a seqlock),
//! drops its claim, whose IDs are then lost (never handed out twice) and
//! claims again. Slots carry the full 64-bit generation: a claimer tells
//! which one its 16 bits belong to from the generation installed before its
//! add, so a claimer stalled while the 16 bits came round again guesses too
//! low, matches no slot and claims again.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Range;
use crate::sync::{fence, AtomicU64};

const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
const GENERATION_MASK: u64 = (1 << (64 - OFFSET_BITS)) - 1;
/// The longest segment served; IDs of a longer range past this are lost,
/// never reused. (Steps are at most 2^40, so a well-behaved store never
/// gets here.) An offset of this much is past the end of every segment.
const MAX_LEN: u64 = 1 << 46;
/// Claims that found the segment used up still add to the offset while a
/// switch is due; an offset past this is folded back to [`MAX_LEN`], long
/// before it could carry into the generation.
const FOLD_AT: u64 = 1 << 47;
/// The largest claim: batches of [`Cursor::claim`] are at most this.
pub(super) const MAX_CLAIM: u64 = 1 << 32;
const SLOTS: usize = 4;
/// A slot's sequence number while it is being written.
const WRITING: u64 = u64::MAX;

/// The first generation from `installed` on whose low 16 bits are `low`.
#[inline]
fn full_generation(installed: u64, low: u64) -> u64 {
    installed + (low.wrapping_sub(installed) & GENERATION_MASK)
}

/// One reserved range, before and while it is current.
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    pub(super) first: u64,
    pub(super) last: u64,
    /// The store's version of the range, which a give-back compares.
    pub(super) version: u64,
    /// The ID whose taker starts loading the next segment.
    pub(super) refill_point: u64,
    pub(super) loaded_at: Instant,
}

impl Segment {
    /// The segment of `range`, without ID 0: a range that starts at 0 (a
    /// tag created at 0, as go-id-alloc's are) is served from 1, and the
    /// range `[0, 1)` makes an empty segment, which the next claim replaces.
    pub(super) fn new(range: Range, refill_at: f64) -> Segment {
        let first = range.first.max(1);
        let len = (range.last + 1).saturating_sub(first);
        let used = ((len as f64) * refill_at.clamp(0.0, 1.0)) as u64;
        Segment {
            first,
            last: range.last,
            version: range.version,
            refill_point: first + used.min(len.saturating_sub(1)),
            loaded_at: Instant::now(),
        }
    }

    pub(super) fn empty() -> Segment {
        Segment {
            first: 1,
            last: 0,
            version: 0,
            refill_point: 0,
            loaded_at: Instant::now(),
        }
    }

    /// The range as the store reserved it.
    pub(super) fn range(&self) -> Range {
        Range {
            first: self.first,
            last: self.last,
            version: self.version,
        }
    }

    /// IDs in the segment (0 for an empty one).
    pub(super) fn len(&self) -> u64 {
        (self.last + 1).saturating_sub(self.first)
    }
}

/// What a claim got.
#[derive(Debug, PartialEq)]
pub(super) enum Claim {
    /// IDs `first..end` (at least one), and the current segment's load time
    /// if the claim took its refill point.
    Ids {
        first: u64,
        end: u64,
        refill: Option<Instant>,
    },
    /// The current segment is used up: a switch is due.
    UsedUp,
}

/// What [`Cursor::install`] replaced.
#[derive(Debug)]
pub(super) struct Replaced {
    pub(super) first: u64,
    pub(super) last: u64,
    /// The store's version of the range.
    pub(super) version: u64,
    /// The first ID nobody claimed (past `last` when every one was).
    pub(super) unclaimed_from: u64,
}

#[derive(Debug)]
struct Slot {
    /// The (full) generation whose segment this is, or [`WRITING`].
    sequence: AtomicU64,
    first: AtomicU64,
    len: AtomicU64,
    /// The offset whose claimer starts the refill.
    refill: AtomicU64,
    /// Nanoseconds from the cursor's epoch.
    loaded_at: AtomicU64,
}

/// A slot as read (its load time is read only when needed).
struct View {
    first: u64,
    len: u64,
    refill: u64,
}

/// The current segment of one tag.
#[derive(Debug)]
pub(super) struct Cursor {
    /// The low 16 bits of the current generation, and the next offset.
    word: AtomicU64,
    /// The full current generation, stored after the swap that made it
    /// current: never ahead of the word.
    installed: AtomicU64,
    slots: [Slot; SLOTS],
    /// The store's version of the current segment's range: only installs,
    /// which are serialised, read and write it.
    version: AtomicU64,
    epoch: Instant,
}

impl Cursor {
    /// A cursor on an empty segment.
    pub(super) fn new() -> Cursor {
        let slot = |sequence| Slot {
            sequence: AtomicU64::new(sequence),
            first: AtomicU64::new(1),
            len: AtomicU64::new(0),
            refill: AtomicU64::new(u64::MAX),
            loaded_at: AtomicU64::new(0),
        };
        Cursor {
            word: AtomicU64::new(0),
            installed: AtomicU64::new(0),
            slots: [slot(0), slot(WRITING), slot(WRITING), slot(WRITING)],
            version: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// Claims up to `n` IDs (`1..=MAX_CLAIM`) of the current segment: fewer
    /// when it has fewer left.
    #[inline]
    pub(super) fn claim(&self, n: u64) -> Claim {
        debug_assert!((1..=MAX_CLAIM).contains(&n));
        loop {
            let installed = self.installed.load(Ordering::Acquire);
            // Acquire: pairs with `install`'s swap, so the slot of the
            // generation read is written.
            let word = self.word.fetch_add(n, Ordering::Acquire);
            if let Some(claim) = self.resolve(installed, word, n) {
                return claim;
            }
        }
    }

    /// What a claim of `n` that added to `word`, having read `installed`
    /// before, got; `None` if its slot was rewritten since (the claimer
    /// stalled until the fourth switch or later): its IDs are lost.
    #[inline]
    fn resolve(&self, installed: u64, word: u64, n: u64) -> Option<Claim> {
        let (low, offset) = (word >> OFFSET_BITS, word & OFFSET_MASK);
        // The claim's own generation, unless it stalled while the low bits
        // came round again (then lower, and no slot holds it).
        let generation = full_generation(installed, low);
        let view = self.read(generation)?;
        if offset >= view.len {
            if offset >= FOLD_AT {
                self.fold(low);
            }
            return Some(Claim::UsedUp);
        }
        let end = offset.saturating_add(n).min(view.len);
        let refill = (offset..end)
            .contains(&view.refill)
            .then(|| self.loaded_at_of(generation));
        Some(Claim::Ids {
            first: view.first + offset,
            end: view.first + end,
            refill,
        })
    }

    /// Makes `segment` current and returns what it replaced, with the first
    /// ID nobody had claimed: claims after the swap get `segment`'s IDs.
    /// Callers serialise their installs (one switch at a time per tag).
    pub(super) fn install(&self, segment: Segment) -> Replaced {
        let current = self.installed.load(Ordering::Relaxed);
        let next = current + 1;
        let slot = &self.slots[next as usize % SLOTS];
        slot.sequence.store(WRITING, Ordering::Relaxed);
        fence(Ordering::Release);
        let len = segment.len().min(MAX_LEN);
        slot.first.store(segment.first, Ordering::Relaxed);
        slot.len.store(len, Ordering::Relaxed);
        slot.refill.store(
            segment.refill_point.wrapping_sub(segment.first),
            Ordering::Relaxed,
        );
        slot.loaded_at
            .store(self.nanos(segment.loaded_at), Ordering::Relaxed);
        slot.sequence.store(next, Ordering::Release);
        let old = self
            .word
            .swap((next & GENERATION_MASK) << OFFSET_BITS, Ordering::AcqRel);
        self.installed.store(next, Ordering::Release);
        let version = self.version.swap(segment.version, Ordering::Relaxed);
        let offset = old & OFFSET_MASK;
        // Nothing else writes slots: the old one still holds its segment.
        let view = self.read(current).unwrap_or(View {
            first: 1,
            len: 0,
            refill: u64::MAX,
        });
        Replaced {
            first: view.first,
            last: (view.first + view.len).wrapping_sub(1),
            version,
            unclaimed_from: view.first + offset.min(view.len),
        }
    }

    /// IDs of the current segment nobody has claimed.
    pub(super) fn left(&self) -> u64 {
        let (view, offset, _) = self.current();
        view.len.saturating_sub(offset)
    }

    /// When the current segment was loaded.
    pub(super) fn loaded_at(&self) -> Instant {
        let (_, _, generation) = self.current();
        self.loaded_at_of(generation)
    }

    /// The current segment, the next offset, and the generation.
    fn current(&self) -> (View, u64, u64) {
        loop {
            let installed = self.installed.load(Ordering::Acquire);
            let word = self.word.load(Ordering::Acquire);
            let generation = full_generation(installed, word >> OFFSET_BITS);
            if let Some(view) = self.read(generation) {
                return (view, word & OFFSET_MASK, generation);
            }
        }
    }

    /// When the segment of `generation` was loaded; only a heuristic (the
    /// dynamic step) uses it, so a slot rewritten meanwhile gives a later
    /// time, never an error.
    fn loaded_at_of(&self, generation: u64) -> Instant {
        let slot = &self.slots[generation as usize % SLOTS];
        self.instant(slot.loaded_at.load(Ordering::Relaxed))
    }

    /// The slot of `generation`, unless it has been rewritten since.
    #[inline]
    fn read(&self, generation: u64) -> Option<View> {
        let slot = &self.slots[generation as usize % SLOTS];
        let before = slot.sequence.load(Ordering::Acquire);
        let view = View {
            first: slot.first.load(Ordering::Relaxed),
            len: slot.len.load(Ordering::Relaxed),
            refill: slot.refill.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        let after = slot.sequence.load(Ordering::Relaxed);
        (before == generation && after == generation).then_some(view)
    }

    /// Brings the offset of a used-up segment whose generation ends in
    /// `low` back to [`MAX_LEN`], still past its end (claims past the end
    /// keep adding while the store is down). Whichever segment that is by
    /// now: MAX_LEN is past the end of every one.
    fn fold(&self, low: u64) {
        let mut word = self.word.load(Ordering::Relaxed);
        while word >> OFFSET_BITS == low && word & OFFSET_MASK >= FOLD_AT {
            match self.word.compare_exchange_weak(
                word,
                (low << OFFSET_BITS) | MAX_LEN,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn instant(&self, nanos: u64) -> Instant {
        self.epoch + Duration::from_nanos(nanos)
    }
}

#[cfg(all(test, workerid_loom))]
mod loom_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Arc;

    /// The segment `first..=last`, refilled from its middle.
    pub(super) fn segment(first: u64, last: u64) -> Segment {
        Segment::new(
            Range {
                first,
                last,
                version: 0,
            },
            0.5,
        )
    }

    #[test]
    fn claims_walk_the_segment_then_report_it_used_up() {
        let cursor = Cursor::new();
        assert_eq!(cursor.claim(1), Claim::UsedUp);
        let loaded = segment(10, 13);
        let replaced = cursor.install(loaded);
        assert!(replaced.first > replaced.last, "the empty segment");
        assert_eq!(cursor.left(), 4);
        let Claim::Ids { first, end, refill } = cursor.claim(1) else {
            panic!("an ID")
        };
        assert_eq!((first, end, refill), (10, 11, None));
        // The refill point (10 + 2) falls in this batch; the batch is cut at
        // the segment's end.
        let Claim::Ids { first, end, refill } = cursor.claim(5) else {
            panic!("IDs")
        };
        assert_eq!((first, end), (11, 14));
        assert_eq!(refill, Some(cursor.loaded_at()));
        assert_eq!(cursor.claim(1), Claim::UsedUp);
        assert_eq!(cursor.left(), 0);
    }

    #[test]
    fn install_reports_the_first_unclaimed_id() {
        let cursor = Cursor::new();
        cursor.install(segment(100, 199));
        cursor.claim(30);
        let replaced = cursor.install(segment(500, 599));
        assert_eq!(
            (replaced.first, replaced.last, replaced.unclaimed_from),
            (100, 199, 130)
        );
        let Claim::Ids { first, .. } = cursor.claim(1) else {
            panic!("an ID")
        };
        assert_eq!(first, 500);
        // Generations wrap around without confusing the slots.
        for round in 0..70_000u64 {
            cursor.install(segment(1_000 + round, 1_000 + round));
        }
        let Claim::Ids { first, .. } = cursor.claim(1) else {
            panic!("an ID")
        };
        assert_eq!(first, 70_999);
    }

    #[test]
    fn claims_past_the_end_are_folded_back() {
        let cursor = Cursor::new();
        cursor.install(segment(1, 10));
        cursor.word.fetch_add(FOLD_AT, Ordering::Relaxed);
        assert_eq!(cursor.claim(1), Claim::UsedUp);
        assert_eq!(cursor.word.load(Ordering::Relaxed) & OFFSET_MASK, MAX_LEN);
        assert_eq!(cursor.word.load(Ordering::Relaxed) >> OFFSET_BITS, 1);
        assert_eq!(cursor.claim(1), Claim::UsedUp);
    }

    #[test]
    fn a_claim_stalled_while_the_generation_came_round_again_is_dropped() {
        let cursor = Cursor::new();
        cursor.install(segment(1, 100));
        // A claimer's first half: it read the generation and added...
        let installed = cursor.installed.load(Ordering::Acquire);
        let word = cursor.word.fetch_add(1, Ordering::Acquire);
        // ...then stalled for 2^16 switches: its generation's low bits and
        // slot are those of the current segment again.
        for round in 0..(1u64 << 16) {
            cursor.install(segment(1_000 + round * 100, 1_099 + round * 100));
        }
        assert_eq!(
            cursor.word.load(Ordering::Relaxed) >> OFFSET_BITS,
            word >> OFFSET_BITS
        );
        let Claim::Ids { first, .. } = cursor.claim(1) else {
            panic!("an ID")
        };
        // Its offset (0) would name the current segment's first ID, which
        // was just handed out: it must get nothing.
        assert_eq!(cursor.resolve(installed, word, 1), None);
        assert_eq!(first, 1_000 + ((1u64 << 16) - 1) * 100);
    }

    #[test]
    fn a_claim_that_read_the_generation_before_a_switch_gets_the_new_segment() {
        let cursor = Cursor::new();
        cursor.install(segment(1, 100));
        // A claimer read the generation installed, then a switch came
        // before its add: its add landed on the new segment.
        let installed = cursor.installed.load(Ordering::Acquire);
        cursor.install(segment(1_001, 1_100));
        let word = cursor.word.fetch_add(1, Ordering::Acquire);
        let Some(Claim::Ids { first, end, .. }) = cursor.resolve(installed, word, 1) else {
            panic!("the claim resolves")
        };
        assert_eq!(
            (first, end),
            (1_001, 1_002),
            "not the old segment's first ID"
        );
    }

    #[test]
    fn threads_racing_switches_never_share_an_id() {
        let cursor = Arc::new(Cursor::new());
        let switches = 2_000u64;
        let len = 50u64;
        // Claimers stop at the first used-up answer after the last switch,
        // however the threads were scheduled before it.
        let switched = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (cursor, switched) = (cursor.clone(), switched.clone());
                std::thread::spawn(move || {
                    let mut ids = Vec::new();
                    loop {
                        match cursor.claim(3) {
                            Claim::Ids { first, end, .. } => ids.extend(first..end),
                            Claim::UsedUp if switched.load(Ordering::Acquire) => break,
                            Claim::UsedUp => std::thread::yield_now(),
                        }
                    }
                    ids
                })
            })
            .collect();
        let mut unclaimed = 0;
        for round in 0..switches {
            let replaced = cursor.install(segment(round * len + 1, (round + 1) * len));
            unclaimed += (replaced.last + 1).saturating_sub(replaced.unclaimed_from);
        }
        switched.store(true, Ordering::Release);
        let mut seen = HashSet::new();
        for thread in threads {
            for id in thread.join().unwrap() {
                assert!(seen.insert(id), "ID {id} handed out twice");
                assert!((1..=switches * len).contains(&id));
            }
        }
        // Every ID of a replaced segment was claimed or counted unclaimed,
        // except those of a claim that stalled until a fourth switch (lost).
        assert!(seen.len() as u64 + unclaimed + cursor.left() <= switches * len);
        assert!(!seen.is_empty());
    }
}
