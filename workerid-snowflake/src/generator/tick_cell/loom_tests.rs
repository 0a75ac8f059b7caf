//! The ticking clock's cell under the loom model checker: the real
//! generator and clock in the interleavings, and with the values of each
//! atomic load, that loom explores (up to three preemptions); a model
//! thread does the ticker's work (`TickingClock::tick_now`), over a fake
//! clock so that every run of a model reads the same times.
//!
//! Run with `bash scripts/loom.sh`.

use std::sync::Arc;
use std::time::Duration;

use loom::sync::atomic::AtomicBool;
use loom::thread;
use tokio::sync::Notify;

use super::super::loom_support::{model, parts};
use super::super::*;
use crate::clock::SteppedAtResync;
use crate::{FakeClock, TickingClock};

/// A whole second: a unit of the classic layout starts there.
const T0: Duration = Duration::from_secs(1_800_000_000);

/// The unit of the classic layout `wall` is in.
fn unit_at(wall: Duration) -> u64 {
    Layout::classic()
        .timestamp_at(wall)
        .expect("a time within the layout")
}

/// A close races the ticker's tick and a caller: a call that began after
/// the close returned issues nothing, whatever the tick worked out from
/// the lease as it was before.
#[test]
fn a_close_holds_against_a_racing_tick_for_every_call_after_it() {
    model("a caller that began after the close", || {
        let base = Arc::new(FakeClock::at(T0));
        let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_millis(1)));
        let g = Generator::new(Layout::classic(), 5, clock.clone()).expect("a generator");
        assert!(g.tick.is_some(), "the ticking clock's fast path");
        let g = Arc::new(g.closed(Arc::new(Notify::new())));
        g.open_until(
            Duration::from_secs(3_600),
            Layout::classic().max_timestamp(),
        );
        g.next_id().expect("open");
        let closed = Arc::new(AtomicBool::new(false));
        let ticker = thread::spawn(move || clock.tick_now());
        let caller = {
            let (g, closed) = (g.clone(), closed.clone());
            thread::spawn(move || {
                let after = closed.load(Ordering::Acquire);
                (after, g.next_id())
            })
        };
        g.close();
        closed.store(true, Ordering::Release);
        let ours = g.next_id();
        assert!(ours.is_err(), "{ours:?} after the close");
        ticker.join().expect("the ticker");
        let (after, issued) = caller.join().expect("the caller");
        assert!(!after || issued.is_err(), "{issued:?} after the close");
        after
    });
}

/// A resync that sets the wall clock back 5 ms races a caller: a call that
/// began once the stored time had moved back issues no ID ahead of the
/// clock by more than the stored time's lag (two periods, within which the
/// general path trusts a unit a reading has been in); the rest of the
/// former unit is waited out, by the drift policy, whatever the cell held
/// when the time was stored.
#[test]
fn a_wall_clock_set_back_is_never_read_ahead_once_its_time_is_stored() {
    model(
        "a caller that began once the earlier time was stored",
        || {
            let base = Arc::new(SteppedAtResync::at(T0));
            let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_millis(1)));
            let lag = Duration::from_nanos(clock.now_coarse_nanos().behind);
            let g =
                Arc::new(Generator::new(Layout::classic(), 5, clock.clone()).expect("a generator"));
            assert!(g.tick.is_some(), "the ticking clock's fast path");
            let first = g.next_id().expect("the first ID");
            assert_eq!(parts(&g, first).0, unit_at(T0));
            base.pending_ms.store(-5, Ordering::SeqCst);
            let caller = {
                let (g, clock, base) = (g.clone(), clock.clone(), base.clone());
                thread::spawn(move || {
                    let seen = Duration::from_nanos(clock.now_coarse_nanos().wall);
                    let issued = g.next_id();
                    (seen, issued, base.now().wall)
                })
            };
            clock.resync();
            let (seen, issued, after) = caller.join().expect("the caller");
            if seen < T0 {
                let ts = parts(&g, issued.expect("waited out")).0;
                let bound = unit_at(after + lag);
                assert!(
                    ts <= bound,
                    "unit {ts} ahead of the clock's and its lag's {bound}"
                );
            }
            seen < T0
        },
    );
}

/// A close races a local handle issuing from its batch, on the ticking
/// clock: a call of the handle that began after the close returned issues
/// nothing, batch or not.
#[test]
fn a_close_holds_for_a_local_handles_batch() {
    model("a handle's call that began after the close", || {
        let base = Arc::new(FakeClock::at(T0));
        let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_millis(1)));
        let g = Generator::new(Layout::classic(), 5, clock).expect("a generator");
        assert!(g.tick.is_some(), "the ticking clock's fast path");
        let g = Arc::new(g.closed(Arc::new(Notify::new())));
        g.open_until(
            Duration::from_secs(3_600),
            Layout::classic().max_timestamp(),
        );
        let mut local = g.local(8).expect("a handle");
        local.next_id().expect("a batch");
        let closed = Arc::new(AtomicBool::new(false));
        let handle = {
            let closed = closed.clone();
            thread::spawn(move || {
                (0..2)
                    .map(|_| (closed.load(Ordering::Acquire), local.next_id()))
                    .collect::<Vec<_>>()
            })
        };
        g.close();
        closed.store(true, Ordering::Release);
        let calls = handle.join().expect("the handle");
        for (after, issued) in &calls {
            assert!(!after || issued.is_err(), "{issued:?} after the close");
        }
        calls.iter().any(|(after, _)| *after)
    });
}
