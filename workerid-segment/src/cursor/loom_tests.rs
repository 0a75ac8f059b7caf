//! The cursor under the loom model checker: the real claims and installs
//! in the interleavings, and with the values of each atomic load, that
//! loom explores (up to three preemptions).
//!
//! Run with `bash scripts/loom.sh`.

use std::sync::Arc;

use loom::thread;
use workerid_loom::model;

use super::tests::segment;
use super::*;

/// A claimer that added to the offset reads its segment's slot while four
/// switches go by, the last of which rewrites that slot (a claimer stalled
/// that long): it gets its own segment's ID or nothing (and claims again),
/// never one of the new segment, which the next claims hand out; and no ID
/// it got was reported unclaimed by a switch (given back to the store and
/// handed out again).
#[test]
fn a_claim_across_a_slots_rewrite_never_shares_an_id() {
    model("a claim that found its slot rewritten", || {
        let cursor = Arc::new(Cursor::new());
        cursor.install(segment(1, 2));
        // The claimer's first half: the generation, then the add; its
        // second half races the switches.
        let installed = cursor.installed.load(Ordering::Acquire);
        let word = cursor.word.fetch_add(1, Ordering::Acquire);
        let stalled = {
            let cursor = cursor.clone();
            thread::spawn(move || cursor.resolve(installed, word, 1))
        };
        let mut unclaimed = Vec::new();
        for round in 1..=4u64 {
            let replaced = cursor.install(segment(round * 10, round * 10 + 1));
            unclaimed.extend(replaced.unclaimed_from..=replaced.last);
        }
        let stalled = stalled.join().expect("the stalled claimer");
        let reached = stalled.is_none();
        let mut ids: Vec<u64> = Vec::new();
        for claim in [stalled, Some(cursor.claim(2))].into_iter().flatten() {
            if let Claim::Ids { first, end, .. } = claim {
                ids.extend(first..end);
            }
        }
        for id in &ids {
            assert!(!unclaimed.contains(id), "{id} claimed and given back");
        }
        let claimed = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), claimed, "an ID handed out twice: {ids:?}");
        assert!(ids.contains(&40), "the last segment's first ID");
        reached
    });
}

/// Two claims race a switch: each gets the old segment's ID or the new
/// one's, whole (the slot of the generation it added to is written before
/// it reads it), none twice, and the switch counts the old one's as
/// claimed.
#[test]
fn claims_racing_a_switch_get_each_id_once() {
    model("a claim of each segment", || {
        let cursor = Arc::new(Cursor::new());
        cursor.install(segment(1, 2));
        let claimers: Vec<_> = (0..2)
            .map(|_| {
                let cursor = cursor.clone();
                thread::spawn(move || cursor.claim(1))
            })
            .collect();
        let replaced = cursor.install(segment(10, 11));
        let mut ids = Vec::new();
        for claimer in claimers {
            match claimer.join().expect("a claimer") {
                Claim::Ids { first, end, .. } => ids.extend(first..end),
                Claim::UsedUp => panic!("a segment with IDs left"),
            }
        }
        for id in &ids {
            assert!(
                [1, 2, 10, 11].contains(id),
                "{id}: not an ID of either segment"
            );
            assert!(
                *id >= 10 || *id < replaced.unclaimed_from,
                "{id} claimed and given back"
            );
        }
        let reached = ids.iter().any(|&id| id < 10) && ids.iter().any(|&id| id >= 10);
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 2, "an ID handed out twice");
        reached
    });
}
