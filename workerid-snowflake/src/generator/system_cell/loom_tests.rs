//! The system clock's gate under the loom model checker: the real
//! generator's calls in the interleavings, and with the values of each
//! atomic load, that loom explores (up to three preemptions).
//!
//! Run with `bash scripts/loom.sh` (`RUSTFLAGS="--cfg workerid_loom"`, its
//! own target directory). Units of an hour, with the clock half an hour
//! into one, so that every reading of a model falls in the same unit and
//! each run of a model takes the same path.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loom::sync::atomic::AtomicBool;

use loom::thread;

use super::super::loom_support::{model, parts};
use super::super::*;
use super::{Gate, SystemCell};

const HOUR: Duration = Duration::from_secs(3_600);

/// 20/18/12 with units of an hour (the timestamp field ends within 2^63 ns
/// of the epoch, so the system clock's fast path serves it), the clock half
/// an hour into unit 2.
fn layout() -> Layout {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970");
    let epoch = Duration::from_secs(now.as_secs()) - HOUR * 2 - HOUR / 2;
    Layout::new(20, 18, 12, HOUR, epoch).expect("a valid layout")
}

const DAY: Duration = Duration::from_secs(86_400);

/// A generator on the system clock, open for a day with the layout's whole
/// window, whose first ID opened the gate for the clock's unit (returned).
fn opened() -> (Arc<Generator>, u64) {
    let layout = layout();
    let g = Generator::with_system_clock(layout, 3).expect("a generator");
    assert!(g.system.is_some(), "the system clock's fast path");
    g.open_until(g.clock.now().mono + DAY, layout.max_timestamp());
    let first = g.next_id().expect("the first ID");
    let ts = layout.decompose(first).timestamp;
    assert!(g.system_cell.gate().is_open_for(
        g.packing.pack(ts, 0),
        g.system.as_ref().map_or(0, |s| s.os_to_wall())
    ));
    (Arc::new(g), ts)
}

/// A renewal that lowers the window below the gate's unit (the wall
/// clock went back) races two callers: a call that began after the renewal
/// returned issues nothing of the unit, whatever a fast path had read.
#[test]
fn a_lowered_window_holds_for_every_call_that_begins_after_it() {
    model("a caller that began after the renewal", || {
        let (g, ts) = opened();
        let renewed = Arc::new(AtomicBool::new(false));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (g, renewed) = (g.clone(), renewed.clone());
                thread::spawn(move || {
                    let after = renewed.load(Ordering::Acquire);
                    (after, g.next_id())
                })
            })
            .collect();
        g.open_until(g.clock.now().mono + DAY, ts - 1);
        renewed.store(true, Ordering::Release);
        let after_renewal = (renewed.load(Ordering::Acquire), g.next_id());
        let callers: Vec<_> = callers
            .into_iter()
            .map(|c| c.join().expect("a caller"))
            .collect();
        let reached = callers.iter().any(|(after, _)| *after);
        let mut ids = Vec::new();
        // A call in flight across the renewal may issue or be refused.
        for (after, issued) in callers.into_iter().chain([after_renewal]) {
            if let Ok(id) = issued {
                assert!(!after, "an ID after the window went below its unit");
                assert_eq!(parts(&g, id).0, ts);
                ids.push(id);
            }
        }
        let issued = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), issued, "an ID issued twice");
        reached
    });
}

/// A renewal that lowers the window below the unit of a local handle's
/// batch races the handle, on the system clock: a call of the handle that
/// began after the renewal returned issues nothing of the batch.
#[test]
fn a_lowered_window_holds_for_a_local_handles_batch() {
    model("a handle's call that began after the renewal", || {
        let (g, ts) = opened();
        let mut local = g.local(8).expect("a handle");
        let first = local.next_id().expect("a batch");
        assert_eq!(parts(&g, first).0, ts);
        let renewed = Arc::new(AtomicBool::new(false));
        let handle = {
            let renewed = renewed.clone();
            thread::spawn(move || {
                (0..2)
                    .map(|_| (renewed.load(Ordering::Acquire), local.next_id()))
                    .collect::<Vec<_>>()
            })
        };
        g.open_until(g.clock.now().mono + DAY, ts - 1);
        renewed.store(true, Ordering::Release);
        let calls = handle.join().expect("the handle");
        for (after, issued) in &calls {
            if let Ok(id) = issued {
                assert!(!after, "an ID after the window went below its unit");
                assert_eq!(parts(&g, *id).0, ts);
            }
        }
        calls.iter().any(|(after, _)| *after)
    });
}

/// A seal races two callers: every ID issued, before or in flight across
/// it, is at or below the sealed value, so the next holder, who starts
/// above it, repeats none.
#[test]
fn a_seal_bounds_every_id_of_calls_in_flight() {
    model(
        "a caller that issued before the seal and was refused after",
        || {
            let (g, _) = opened();
            let callers: Vec<_> = (0..2)
                .map(|_| {
                    let g = g.clone();
                    thread::spawn(move || [g.next_id(), g.next_id()])
                })
                .collect();
            g.seal();
            let sealed = g.sealed_last.load(Ordering::Acquire);
            let bound = (g.packing.ts(sealed), g.packing.seq(sealed));
            let results: Vec<_> = callers
                .into_iter()
                .map(|c| c.join().expect("a caller"))
                .collect();
            let reached = results
                .iter()
                .any(|[first, second]| first.is_ok() && second.is_err());
            let mut ids: Vec<u64> = results
                .into_iter()
                .flatten()
                .filter_map(|issued| issued.ok())
                .collect();
            for &id in &ids {
                let parts = parts(&g, id);
                assert!(parts <= bound, "{parts:?} above the seal {bound:?}");
            }
            let issued = ids.len();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), issued, "an ID issued twice");
            assert!(g.next_id().is_err(), "sealed");
            reached
        },
    );
}

/// `last` raised ahead of the clock (a watermark from a clock ahead) races
/// a caller: a call that began after the raise issues nothing of the
/// gate's unit below it.
#[test]
fn a_raised_last_holds_for_every_call_that_begins_after_it() {
    model("a caller that began after the raise", || {
        let (g, ts) = opened();
        let raised = Arc::new(AtomicBool::new(false));
        let caller = {
            let (g, raised) = (g.clone(), raised.clone());
            thread::spawn(move || {
                let after = raised.load(Ordering::Acquire);
                (after, g.next_id())
            })
        };
        g.set_last_used_timestamp(ts + 5);
        raised.store(true, Ordering::Release);
        let (after, issued) = caller.join().expect("a caller");
        if after {
            assert!(issued.is_err(), "{issued:?} after the raise");
        }
        let ours = g.next_id();
        assert!(ours.is_err(), "{ours:?} after the raise");
        after
    });
}

/// What a reader takes of the cell while a claim opens a new gate: with
/// the newer end, the unit and offset stored with it; with the older one,
/// each of them either gate's. (A shut of the gate a call read racing an
/// opening is a compare-and-swap racing a store, which loom 0.7 does not
/// model soundly, its issue 254: `tests.rs` checks it.)
#[test]
fn a_reader_pairs_an_end_with_its_unit_or_a_newer_one() {
    let first = Gate::new(100, 1_000, u64::MAX, 7);
    let second = Gate::new(200, 2_000, u64::MAX, 8);
    model("an older end read with the newer unit", move || {
        let cell = Arc::new(SystemCell::default());
        cell.open(&cell.setting(), first);
        let opener = {
            let cell = cell.clone();
            thread::spawn(move || cell.open(&cell.setting(), second))
        };
        let read = cell.gate();
        let mixed = read.end == first.end && read.base == second.base;
        if read.end == second.end {
            assert_eq!(read, second);
        } else {
            assert_eq!(read.end, first.end, "{read:?}");
            assert!([first.base, second.base].contains(&read.base), "{read:?}");
            assert!([7, 8].contains(&read.os_to_wall), "{read:?}");
        }
        opener.join().expect("the opener");
        assert_eq!(cell.gate(), second);
        mixed
    });
}
