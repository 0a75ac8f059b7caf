use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use proptest::prelude::*;

use super::*;
use crate::clock::{whole_nanos, SteppedAtResync};
use crate::generator::packing::values_of_last;
use crate::test_support::{layouts, near_the_ends, ticking_worker_generator as worker_generator};
use crate::{
    Clock, CoarseNanos, FakeClock, Generator, Layout, NextIdError, Reading, StoredTime,
    TickingClock,
};

const T0: Duration = Duration::from_secs(1_800_000_000);

proptest! {
    /// The fast path's one comparison is its rule: `last` in the base's
    /// unit, with its worker field whole and a sequence number left, for
    /// every value `last` takes (packed ones, increments carried out of a
    /// full sequence, up to the layout's last unit and past it, sealed
    /// ones); a cell that admits nothing admits none of them.
    #[test]
    fn the_unit_base_admits_exactly_the_issuable_values_of_its_unit(
        layout in 0..5usize,
        worker in any::<u32>(),
        unit in any::<u64>(),
        offset in 0u64..5,
        seq in any::<u64>(),
        carries in 1u64..4,
        above_sealed in 0u64..1_000,
    ) {
        let layout = layouts()[layout];
        let max_ts = layout.max_timestamp();
        let packing = Packing::new(&layout, worker % (layout.max_worker_id() + 1));
        // Units near both ends of the range as often as in between.
        let unit = near_the_ends(unit, max_ts);
        let ts = (unit + offset).saturating_sub(2).min(max_ts);
        let values = values_of_last(&layout, &packing, ts, seq, carries, above_sealed);
        let nothing = packing.seq_limit().wrapping_neg();
        for last in values {
            let rule = packing.ts(last) == unit
                && packing.issuable(last)
                && last >> 63 == 0;
            let base = packing.pack(unit, 0);
            prop_assert_eq!(in_unit(last, base, packing.seq_limit()), rule, "last {:#x}", last);
            prop_assert!(!in_unit(last, nothing, packing.seq_limit()), "last {:#x}", last);
        }
    }
}

fn cell(generator: &Generator) -> &Arc<TickCell> {
    generator
        .tick_cell()
        .expect("a ticking clock's generator has a cell")
}

/// How far the cell's stored time may lag.
fn lag(generator: &Generator) -> Duration {
    Duration::from_nanos(cell(generator).stored().lag())
}

/// The unit base of the unit a wall time is in.
fn base_at(generator: &Generator, wall: Duration) -> u64 {
    generator.unit_base(generator.unit_at(whole_nanos(wall)))
}

/// Waits (up to ten seconds) until `done`.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let waited = Instant::now();
    while !done() {
        assert!(waited.elapsed() < Duration::from_secs(10), "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_fast_path_is_open_only_while_the_lease_is_live_and_the_window_open() {
    let base = Arc::new(FakeClock::at(T0));
    // No tick comes during the test.
    let g = worker_generator(&base, Duration::from_secs(3_600));
    let nothing = cell(&g).nothing;
    assert_eq!(cell(&g).unit_base(), nothing, "closed from the start");
    assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));

    let max = Layout::classic().max_timestamp();
    let now = base.now();
    g.open_until(now.mono + lag(&g) + Duration::from_secs(60), max);
    assert_eq!(cell(&g).unit_base(), base_at(&g, now.wall), "open at once");
    g.next_id().unwrap();
    assert!(cell(&g).admits(g.last.load(Ordering::SeqCst)));

    g.close();
    assert_eq!(cell(&g).unit_base(), nothing, "closed at once");
    assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));

    // Within the stored time's lag of the deadline the lease is not surely
    // live by that time: the fast path refuses, the precise clock decides.
    g.open_until(now.mono + lag(&g), max);
    assert_eq!(cell(&g).unit_base(), nothing);
    g.next_id().unwrap();

    // A window that ends before the stored time's unit.
    let unit = g.unit_at(whole_nanos(now.wall));
    g.open_until(now.mono + lag(&g) + Duration::from_secs(60), unit - 1);
    assert_eq!(cell(&g).unit_base(), nothing);
    let refused = g.next_id();
    assert!(
        matches!(&refused, Err(NextIdError::NotReady { reason }) if reason.contains("window")),
        "{refused:?}"
    );
}

/// A last ID raised ahead of the ticker's unit (the store's watermark) is
/// refused without an increment, however often the caller retries: the
/// ticking path compares before it adds, and its fallback goes on from the
/// stored time, never through the ticking path again.
#[test]
fn a_last_raised_ahead_is_never_incremented_on_a_ticking_clock() {
    let base = Arc::new(FakeClock::at(T0));
    let g = worker_generator(&base, Duration::from_secs(3_600));
    let now = base.now();
    let max = Layout::classic().max_timestamp();
    g.open_until(now.mono + lag(&g) + Duration::from_secs(60), max);
    g.next_id().unwrap();
    g.set_last_used_timestamp(g.last_used_timestamp() + 5_000);
    let raised = g.last.load(Ordering::SeqCst);
    for _ in 0..1_000 {
        let refused = g.next_id().unwrap_err();
        assert!(
            matches!(refused, NextIdError::ClockDriftTryLater { .. }),
            "{refused}"
        );
    }
    assert_eq!(g.last.load(Ordering::SeqCst), raised, "no number given up");
}

#[test]
fn the_ticker_moves_the_unit_base_to_the_clocks_new_unit() {
    let base = Arc::new(FakeClock::at(T0));
    let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_micros(100)));
    let g = Generator::new(Layout::classic(), 5, clock).unwrap();
    g.next_id().unwrap();
    base.advance(Duration::from_millis(5));
    let later = base_at(&g, T0 + Duration::from_millis(5));
    wait_until("the ticker moves the unit base", || {
        cell(&g).unit_base() == later
    });
    let id = g.next_id().unwrap();
    assert_eq!(
        Layout::classic().decompose(id).time,
        UNIX_EPOCH + T0 + Duration::from_millis(5)
    );
}

#[test]
fn a_tick_past_the_deadline_less_the_lag_admits_nothing() {
    let base = Arc::new(FakeClock::at(T0));
    let g = worker_generator(&base, Duration::from_micros(100));
    let deadline = base.now().mono + lag(&g) + Duration::from_millis(3);
    g.open_until(deadline, Layout::classic().max_timestamp());
    assert_ne!(cell(&g).unit_base(), cell(&g).nothing, "live");
    base.advance(Duration::from_millis(3));
    wait_until("a tick at the deadline less the lag", || {
        cell(&g).unit_base() == cell(&g).nothing
    });
}

/// When the cell declines because the stored time is past the deadline
/// less the lag, the general path reads the same stored time and declines
/// too: `claim` then asks the precise clock, which is past the deadline.
#[test]
fn past_the_deadline_by_the_stored_time_no_path_issues() {
    // At a whole millisecond, so that what follows stays in one unit.
    let base = Arc::new(FakeClock::at(T0));
    let g = worker_generator(&base, Duration::from_micros(100));
    let now = base.now();
    let deadline = now.mono + lag(&g) + Duration::from_micros(100);
    g.open_until(deadline, Layout::classic().max_timestamp());
    g.next_id().unwrap();
    let (_, wall) = cell(&g).stored().read();
    assert_eq!(
        g.live_since_epoch(),
        Some((wall - g.epoch_ns, whole_nanos(lag(&g)))),
        "the general path reads the stored time since the epoch"
    );
    base.advance(Duration::from_micros(400));
    let stored_past = now.mono + Duration::from_micros(400);
    wait_until("a tick stores the time past the deadline", || {
        g.tick_cell().unwrap().stored().read().0 >= whole_nanos(stored_past)
    });
    assert_eq!(cell(&g).unit_base(), cell(&g).nothing);
    assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
}

#[test]
fn a_close_racing_the_ticker_is_never_undone_by_it() {
    let base = Arc::new(FakeClock::at(T0));
    // The ticker updates the cell every 10 µs while the lease is opened
    // and closed: a base it worked out from the open lease must never land
    // after the close.
    let g = worker_generator(&base, Duration::from_micros(10));
    let far = base.now().mono + lag(&g) + Duration::from_secs(3_600);
    for _ in 0..5_000 {
        g.open_until(far, Layout::classic().max_timestamp());
        g.close();
        assert_eq!(cell(&g).unit_base(), cell(&g).nothing);
    }
}

#[test]
fn a_resync_moves_the_unit_base_back_at_once() {
    let base = Arc::new(SteppedAtResync::at(T0));
    let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_secs(3_600)));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    g.next_id().unwrap();
    assert_eq!(cell(&g).unit_base(), base_at(&g, T0));
    base.pending_ms.store(-2_000, Ordering::SeqCst);
    clock.resync();
    assert_eq!(
        cell(&g).unit_base(),
        base_at(&g, T0 - Duration::from_secs(2)),
        "the wall clock set back is the cell's at once, not at the next tick"
    );
    assert!(!cell(&g).admits(g.last.load(Ordering::SeqCst)));
}

/// A clock that hands on a ticking clock's stored time without holding
/// that clock.
#[derive(Debug)]
struct HandsOn {
    base: Arc<FakeClock>,
    stored: StoredTime,
}

impl Clock for HandsOn {
    fn now(&self) -> Reading {
        self.base.now()
    }
    fn now_coarse_nanos(&self) -> CoarseNanos {
        CoarseNanos::exact(self.base.now())
    }
    fn sleep(&self, duration: Duration) {
        self.base.sleep(duration)
    }
    fn stored_time(&self) -> Option<StoredTime> {
        Some(self.stored.clone())
    }
}

#[test]
fn a_ticker_that_ends_shuts_the_cells_it_kept() {
    let base = Arc::new(FakeClock::at(T0));
    let ticking = TickingClock::over(base.clone(), Duration::from_micros(100));
    let stored = ticking.stored_time().expect("the ticker runs");
    let clock = Arc::new(HandsOn {
        base: base.clone(),
        stored,
    });
    let g = Generator::new(Layout::classic(), 5, clock).unwrap();
    assert_ne!(cell(&g).unit_base(), cell(&g).nothing);
    drop(ticking);
    wait_until("the ending ticker shuts the cell", || {
        cell(&g).unit_base() == cell(&g).nothing
    });
    g.next_id().expect("the general path");
}
