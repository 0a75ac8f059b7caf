use super::reading::in_unit;
use super::*;
use crate::clock::LaggingClock;
use crate::{FakeClock, FieldOrder, TickingClock};

const T0: Duration = Duration::from_secs(1_800_000_000);

fn generator(clock: &Arc<FakeClock>) -> Generator {
    Generator::new(Layout::classic(), 5, clock.clone()).unwrap()
}

#[test]
fn ids_rise_and_carry_the_worker_id() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    let mut last = 0;
    for _ in 0..10 {
        let id = g.next_id().unwrap();
        assert!(id > last);
        last = id;
        clock.advance(Duration::from_micros(300));
    }
    let parts = Layout::classic().decompose(last);
    assert_eq!(parts.worker_id, 5);
    assert_eq!(
        parts.time,
        std::time::UNIX_EPOCH + T0 + Duration::from_millis(2)
    );
}

#[test]
fn sonyflakes_field_order_rises_and_decodes() {
    let clock = Arc::new(FakeClock::at(T0 + Duration::from_millis(25)));
    let layout = Layout::sonyflake();
    let g = Generator::new(layout, 4355, clock.clone()).unwrap();
    let mut local = Arc::new(Generator::new(layout, 4356, clock.clone()).unwrap())
        .local(8)
        .unwrap();
    let (mut last, mut last_local) = (0, 0);
    for i in 0..600u64 {
        let id = g.next_id().unwrap();
        let from_local = local.next_id().unwrap();
        assert!(id > last && from_local > last_local, "IDs rise");
        let (parts, local_parts) = (layout.decompose(id), layout.decompose(from_local));
        assert_eq!((parts.worker_id, local_parts.worker_id), (4355, 4356));
        assert_eq!(id, layout.compose(parts.timestamp, 4355, parts.sequence));
        assert_eq!(
            from_local,
            layout.compose(local_parts.timestamp, 4356, local_parts.sequence)
        );
        assert_eq!(
            id & 0xffff,
            4355,
            "the machine ID in the low bits, as Sonyflake puts it"
        );
        let unit = layout.timestamp_at(clock.now().wall).unwrap();
        assert_eq!((parts.timestamp, local_parts.timestamp), (unit, unit));
        (last, last_local) = (id, from_local);
        if i % 100 == 99 {
            clock.advance(Duration::from_millis(10));
        }
    }
}

#[test]
fn an_exhausted_sequence_waits_for_the_next_unit_and_never_wraps() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    let first = Layout::classic().decompose(g.next_id().unwrap());
    for _ in 0..4095 {
        g.next_id().unwrap();
    }
    assert_eq!(
        clock.now().mono,
        Duration::ZERO,
        "4096 IDs fit one millisecond"
    );
    let next = Layout::classic().decompose(g.next_id().unwrap());
    assert_eq!((next.timestamp, next.sequence), (first.timestamp + 1, 0));
    assert_eq!(
        clock.now().mono,
        Duration::from_millis(1),
        "it waited for the next millisecond"
    );
}

#[test]
fn drift_buckets_block_try_later_and_give_up() {
    let clock = Arc::new(FakeClock::at(T0));
    drift_buckets(clock.clone(), &clock, Duration::ZERO);
}

/// The same buckets when the cheap reading lags, as a ticking clock's does
/// between two ticks.
#[test]
fn drift_buckets_are_the_same_on_a_lagging_cheap_reading() {
    let clock = Arc::new(LaggingClock::at(T0));
    clock.lag_ms.store(1, Ordering::SeqCst);
    drift_buckets(clock.clone(), &clock.inner, Duration::from_millis(1));
}

/// Small steps back are waited out, medium ones answered at once with
/// `ClockDriftTryLater`, large ones with `ClockDriftTooLarge`; `fake` is
/// the fake time under `clock`, whose cheap reading lags it by `lag` (the
/// first ID carries that earlier time, so a step back is waited out `lag`
/// sooner).
fn drift_buckets(clock: Arc<dyn Clock>, fake: &FakeClock, lag: Duration) {
    let g = Generator::new(Layout::classic(), 5, clock).unwrap();
    let before = g.next_id().unwrap();
    // Small: blocks until caught up, then succeeds above the last ID.
    fake.step_wall(-500);
    let waited_from = fake.now().mono;
    let after = g.next_id().unwrap();
    assert!(after > before);
    assert!(fake.now().mono - waited_from >= Duration::from_millis(500) - lag);
    // Medium: at once, without waiting.
    fake.step_wall(-3_000);
    let at = fake.now().mono;
    assert!(
        matches!(g.next_id(), Err(NextIdError::ClockDriftTryLater { drift }) if drift >= Duration::from_secs(3))
    );
    assert_eq!(fake.now().mono, at);
    // Large: beyond recovery.
    fake.step_wall(-30_000);
    assert!(matches!(
        g.next_id(),
        Err(NextIdError::ClockDriftTooLarge { .. })
    ));
    // Once the clock is right again, IDs resume above the old ones.
    fake.step_wall(33_000);
    assert!(g.next_id().unwrap() > after);
}

#[test]
fn a_sealed_generator_issues_nothing_even_to_calls_in_flight() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    for _ in 0..5 {
        g.next_id().unwrap();
    }
    clock.advance(Duration::from_millis(3));
    let last = Layout::classic().decompose(g.next_id().unwrap()).timestamp;
    assert_eq!(g.seal(), last);
    assert_eq!(g.last_used_timestamp(), last, "still readable once sealed");
    assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
    // A call that found the generator open before the seal: its
    // increment or compare-and-swap of `last` comes after it.
    g.open_until(Duration::from_secs(1 << 30), u64::MAX >> 22);
    for _ in 0..3 {
        assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
        assert!(matches!(g.claim(4), Err(NextIdError::NotReady { .. })));
        g.last.fetch_add(g.packing.step(), Ordering::AcqRel);
        clock.advance(Duration::from_millis(1));
    }
    assert_eq!(g.seal(), last, "sealing twice keeps the first answer");
}

#[test]
fn the_last_used_timestamp_only_rises() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    let id = g.next_id().unwrap();
    let ts = Layout::classic().decompose(id).timestamp;
    assert_eq!(g.last_used_timestamp(), ts);
    g.set_last_used_timestamp(ts + 100);
    g.set_last_used_timestamp(ts + 50);
    assert_eq!(g.last_used_timestamp(), ts + 100);
    clock.advance(Duration::from_millis(100));
    let next = Layout::classic().decompose(g.next_id().unwrap());
    assert_eq!(next.timestamp, ts + 101, "strictly above the timestamp set");
}

#[test]
fn the_last_id_of_a_layout_using_every_bit_is_not_taken_for_a_seal() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    let end = Layout::classic().max_timestamp();
    g.set_last_used_timestamp(end);
    assert_eq!(g.last_used_timestamp(), end);
    assert_eq!(g.seal(), end);
}

#[test]
fn a_closed_generator_or_a_passed_deadline_or_window_issues_nothing() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    assert_eq!(
        g.lease_deadline(),
        None,
        "an open generator has no deadline"
    );
    g.close();
    assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
    let ts = Layout::classic().timestamp_at(T0).unwrap();
    g.open_until(Duration::from_secs(1), ts + 10);
    assert_eq!(g.lease_deadline(), Some(Duration::from_secs(1)));
    assert_eq!(g.window_end(), ts + 10);
    g.next_id().unwrap();
    clock.advance(Duration::from_millis(20));
    assert!(
        matches!(g.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("window"))
    );
    g.open_until(Duration::from_secs(1), ts + 10_000);
    g.next_id().unwrap();
    clock.advance(Duration::from_secs(1));
    assert!(
        matches!(g.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("deadline"))
    );
    g.close();
    assert_eq!(
        g.lease_deadline(),
        Some(Duration::from_secs(1)),
        "the last deadline stays readable once closed"
    );
}

#[test]
fn a_coarse_clock_behind_the_last_id_does_not_force_precise_reads() {
    let clock = Arc::new(LaggingClock::at(T0));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    let first = Layout::classic().decompose(g.next_id().unwrap());
    // The coarse clock now reads 3 ms behind, 2 ms before the last ID.
    clock.lag_ms.store(3, Ordering::SeqCst);
    clock.inner.advance(Duration::from_millis(1));
    let reads = clock.precise_reads.load(Ordering::SeqCst);
    let mut last = 0;
    for _ in 0..1000 {
        let id = g.next_id().unwrap();
        assert!(id > last);
        last = id;
    }
    assert_eq!(
        clock.precise_reads.load(Ordering::SeqCst),
        reads,
        "IDs in the last ID's unit need no precise reading"
    );
    let parts = Layout::classic().decompose(last);
    assert_eq!((parts.timestamp, parts.sequence), (first.timestamp, 1000));
    // Beyond what the lag can explain, it is a clock that went back:
    // the precise clock decides (here it is fine, 1 ms later).
    clock.lag_ms.store(10, Ordering::SeqCst);
    let next = Layout::classic().decompose(g.next_id().unwrap());
    assert!(clock.precise_reads.load(Ordering::SeqCst) > reads);
    assert_eq!((next.timestamp, next.sequence), (first.timestamp + 1, 0));
}

/// The timestamp and sequence of the ID an increment issues (checked
/// against `Layout::decompose`).
fn incremented(g: &Generator) -> Option<(u64, u64)> {
    g.increment().map(|claimed| {
        let parts = g.layout().decompose(g.packing.id(claimed));
        assert_eq!(parts.worker_id, g.worker_id());
        (parts.timestamp, parts.sequence)
    })
}

#[test]
fn the_packing_of_last_makes_the_layouts_ids() {
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::at(T0));
    let wide = Layout::new(41, 2, 20, Duration::from_millis(1), crate::CLASSIC_EPOCH).unwrap();
    for (layout, worker) in [
        (Layout::classic(), 1023),
        (Layout::classic(), 0),
        (Layout::sonyflake(), 65_535),
        (wide, 3),
    ] {
        let g = Generator::new(layout, worker, clock.clone()).unwrap();
        for (ts, seq) in [
            (0, 0),
            (1, 1),
            (layout.max_timestamp(), layout.max_sequence()),
        ] {
            assert_eq!(
                g.packing.id(g.packing.pack(ts, seq)),
                layout.compose(ts, worker, seq),
                "{layout:?} {worker} {ts} {seq}"
            );
        }
    }
}

#[test]
fn the_increment_takes_only_the_common_case() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    let ts = Layout::classic().timestamp_at(T0).unwrap();
    assert_eq!(incremented(&g), None, "a new unit needs a compare-and-swap");
    let first = Layout::classic().decompose(g.next_id().unwrap());
    assert_eq!((first.timestamp, first.sequence), (ts, 0));
    assert_eq!(incremented(&g), Some((ts, 1)));
    clock.advance(Duration::from_millis(1));
    assert_eq!(incremented(&g), None, "the clock is in the next unit");
    g.next_id().unwrap();
    assert_eq!(incremented(&g), Some((ts + 1, 1)));
    g.close();
    assert_eq!(incremented(&g), None, "closed");
    g.open_until(Duration::from_millis(5), ts + 1);
    assert_eq!(incremented(&g), Some((ts + 1, 2)));
    g.open_until(Duration::from_millis(5), ts);
    assert_eq!(incremented(&g), None, "past the window");
    g.open_until(Duration::from_millis(1), ts + 1);
    assert_eq!(incremented(&g), None, "at the deadline");
    g.open_until(Duration::from_secs(1), ts + 10);
    g.set_last_used_timestamp(ts + 1);
    assert_eq!(incremented(&g), None, "the sequence is exhausted");
}

#[test]
fn a_clock_standing_still_before_the_deadline_issues_and_at_it_issues_nothing() {
    // The clock stands still between the calls (as a fake clock does):
    // every call still compares its own reading with the deadline, also
    // in the unit of the last ID, where the increment would serve it.
    let clock = Arc::new(LaggingClock::at(T0));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    let ts = Layout::classic().timestamp_at(T0).unwrap();
    let deadline = Duration::from_micros(100_500);
    g.open_until(deadline, ts + 1_000);
    clock.inner.advance(Duration::from_millis(100));
    for _ in 0..1000 {
        g.next_id().unwrap();
    }
    clock.inner.advance(Duration::from_micros(500));
    assert_eq!(clock.now().mono, deadline);
    for _ in 0..1000 {
        assert_eq!(incremented(&g), None);
        assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
    }
    // The coarse clock 3 ms behind with up to 4 ms of lag cannot tell:
    // the precise clock (at the deadline) decides.
    clock.lag_ms.store(3, Ordering::SeqCst);
    for _ in 0..1000 {
        assert_eq!(incremented(&g), None);
        assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
    }
    g.open_until(Duration::from_millis(200), ts + 1_000);
    assert!(g.next_id().is_ok());
}

#[test]
fn a_unit_carried_into_is_issued_only_once_the_clock_is_in_it() {
    // A racing increment can carry `last` into the next unit before any
    // clock reached it; within the coarse clock's lag it must still not
    // be issued early. It is waited for, not taken for drift (with no
    // drift allowed at all).
    let clock = Arc::new(LaggingClock::at(T0));
    let none = DriftPolicy {
        block_below: Duration::ZERO,
        give_up_at: Duration::ZERO,
    };
    let g = Generator::with_policy(Layout::classic(), 5, clock.clone(), none).unwrap();
    let ts = Layout::classic().timestamp_at(T0).unwrap();
    g.next_id().unwrap();
    // (What an overflowing increment leaves with a worker field below the
    // sequence; with one above it, the field carries too and only `claim`
    // goes on from it.)
    g.last.store(g.packing.pack(ts + 1, 0), Ordering::SeqCst);
    assert_eq!(incremented(&g), None);
    let id = Layout::classic().decompose(g.next_id().unwrap());
    assert_eq!((id.timestamp, id.sequence), (ts + 1, 1));
    assert!(
        clock.now().wall >= Layout::classic().time_of(ts + 1),
        "it waited for the unit"
    );
    // Once a reading was in it, the lagging coarse clock may use it.
    clock.lag_ms.store(3, Ordering::SeqCst);
    assert_eq!(incremented(&g), Some((ts + 1, 2)));
}

/// Two increments racing at a unit's last sequence number: the second
/// carries through the worker field (zeroing it) into the next unit. Once
/// the clock is in that unit, an increment of it would issue another
/// worker's ID; `claim` goes on from it instead.
#[test]
fn a_value_carried_through_the_worker_field_is_never_incremented() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = generator(&clock);
    let ts = Layout::classic().timestamp_at(T0).unwrap();
    g.next_id().unwrap();
    let full = g.packing.pack(ts, Layout::classic().max_sequence());
    g.last.store(full + g.packing.step(), Ordering::SeqCst);
    clock.advance(Duration::from_millis(1));
    assert_eq!(incremented(&g), None);
    let id = Layout::classic().decompose(g.next_id().unwrap());
    assert_eq!((id.worker_id, id.timestamp, id.sequence), (5, ts + 1, 1));
    assert_eq!(incremented(&g), Some((ts + 1, 2)));
}

#[test]
fn threads_exhausting_units_share_no_id_and_never_run_ahead_of_the_clock() {
    // The classic layout's 4096 IDs per ms run out every few µs here, so
    // increments race into exhausted units and carry (through the worker
    // field, for the classic order: every ID must still carry worker 1).
    let sonyflake_order = Layout::classic().with_field_order(FieldOrder::SequenceThenWorker);
    for layout in [Layout::classic(), sonyflake_order] {
        let clock = Arc::new(SystemClock::new());
        let g = Arc::new(Generator::new(layout, 1, clock.clone()).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (g, clock) = (g.clone(), clock.clone());
                std::thread::spawn(move || {
                    let mut ids = Vec::with_capacity(50_000);
                    for _ in 0..50_000 {
                        let id = g.next_id().unwrap();
                        let parts = layout.decompose(id);
                        assert_eq!(parts.worker_id, 1, "{layout:?}");
                        assert!(parts.time <= std::time::UNIX_EPOCH + clock.now().wall);
                        assert!(ids.last().is_none_or(|&last| id > last));
                        ids.push(id);
                    }
                    ids
                })
            })
            .collect();
        crate::test_support::assert_threads_distinct(threads);
    }
}

#[test]
fn the_system_clock_is_called_directly_and_others_through_the_trait() {
    let system = Generator::with_system_clock(Layout::classic(), 1).unwrap();
    assert!(system.system.is_some());
    assert!(system.next_id().is_ok());
    let fake = generator(&Arc::new(FakeClock::at(T0)));
    assert!(fake.system.is_none());
}

/// On the system clock, across units, every ID's timestamp is the unit of
/// a reading taken during its call, both where the fast path checks the
/// unit as a span of nanoseconds and where the layout's units reach past
/// 2^63 ns, so that every ID goes through the trait's reading.
#[test]
fn the_system_clock_issues_the_units_of_its_readings_with_and_without_the_span_check() {
    let wide = Layout::new(50, 6, 7, Duration::from_millis(1), crate::CLASSIC_EPOCH).unwrap();
    for (layout, spanned) in [(Layout::classic(), true), (wide, false)] {
        let clock = Arc::new(SystemClock::new());
        let g = Generator::new(layout, 1, clock.clone()).unwrap();
        assert_eq!(g.system.is_some(), spanned);
        let lag = clock.os_coarse_lag();
        let began = std::time::Instant::now();
        let (mut first, mut last_id) = (None, 0);
        loop {
            let before = clock.now().wall;
            let id = g.next_id().unwrap();
            let after = clock.now().wall;
            let ts = layout.decompose(id).timestamp;
            // A coarse reading is behind the precise one by up to its lag.
            let earliest = g.unit_at(crate::clock::whole_nanos(before).saturating_sub(lag));
            let latest = g.unit_at(crate::clock::whole_nanos(after));
            assert!(
                earliest <= ts && ts <= latest,
                "{earliest} <= {ts} <= {latest}"
            );
            assert!(id > last_id, "rising");
            last_id = id;
            if ts >= *first.get_or_insert(ts) + 3 {
                break;
            }
            assert!(
                began.elapsed() < Duration::from_secs(1),
                "the clock moved 3 units"
            );
        }
    }
}

#[test]
fn worker_ids_must_fit_the_layout() {
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::at(T0));
    assert!(Generator::new(Layout::classic(), 1024, clock.clone()).is_err());
    assert!(Generator::new(Layout::classic(), 1023, clock).is_ok());
}

/// A ticker descheduled past its declared lag (a [`TickingClock`] whose
/// stored time went stale): IDs may still come after the lease deadline by
/// real time, but only with the stale timestamp, within the reserved
/// window, and no more than the sequence holds; then the precise clock
/// closes the generator.
#[test]
fn a_stalled_ticker_issues_only_older_timestamps_within_the_window() {
    let clock = Arc::new(LaggingClock::at(T0));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    let window_end = g.unit_at(crate::clock::whole_nanos(T0 + Duration::from_millis(100)));
    g.open_until(Duration::from_millis(100), window_end);
    let first = g.next_id().unwrap();
    let stale = Layout::classic().decompose(first).time;
    // Real time passes the deadline; the cheap reading stays where it was.
    clock.inner.advance(Duration::from_millis(200));
    clock.lag_ms.store(200, Ordering::SeqCst);
    let mut issued = Vec::new();
    let refusal = loop {
        match g.next_id() {
            Ok(id) => issued.push(id),
            Err(e) => break e,
        }
        assert!(issued.len() < 4_096, "more IDs than one unit's sequence");
    };
    assert!(matches!(refusal, NextIdError::NotReady { .. }), "{refusal}");
    for id in &issued {
        let parts = Layout::classic().decompose(*id);
        assert_eq!(parts.time, stale, "only the stale timestamp");
        assert!(*id > first);
    }
    assert_eq!(issued.len(), 4_095, "the rest of the stale unit's sequence");
    assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
}

#[test]
fn a_ticking_clock_serves_the_generator() {
    let clock = Arc::new(TickingClock::with_period(Duration::from_micros(200)));
    let g = Generator::new(Layout::classic(), 3, clock.clone()).unwrap();
    let mut last = 0;
    for _ in 0..20_000 {
        let id = g.next_id().unwrap();
        assert!(id > last);
        last = id;
    }
    let parts = Layout::classic().decompose(last);
    assert_eq!(parts.worker_id, 3);
    let now = std::time::UNIX_EPOCH + clock.now().wall;
    assert!(parts.time <= now, "never ahead of the clock");
}

/// On the system clock the fast path's own reading (the operating system's,
/// with the deadline and epoch converted to its terms) is the clock's
/// coarse reading: the same time since the epoch within one tick, live
/// exactly while the coarse reading plus its lag is before the deadline.
#[test]
fn the_system_clocks_fast_path_reads_what_the_clock_reads() {
    let clock = Arc::new(SystemClock::new());
    let g = Generator::new(Layout::classic(), 1, clock.clone()).unwrap();
    let epoch_ns = g.epoch_ns;
    let mut compared = 0;
    for _ in 0..10_000 {
        let before = clock.now_coarse_nanos();
        let fast = g.live_since_epoch().expect("an open generator is live");
        if clock.now_coarse_nanos() == before {
            assert_eq!(fast, (before.wall - epoch_ns, before.behind));
            compared += 1;
        }
    }
    assert!(compared > 0, "the coarse clock ticked between every pair");
    // The span check on the operating system's reading finds the unit of
    // the clock's own reading, and not the units beside it.
    let mut compared = 0;
    for _ in 0..10_000 {
        let before = clock.now_coarse_nanos();
        let os = SystemClock::os_coarse(g.os_lag);
        let to_since = clock.os_to_since(epoch_ns);
        if clock.now_coarse_nanos() == before {
            let unit = g.unit_at(before.wall);
            assert!(in_unit(os, to_since, unit, g.span_ns), "at {before:?}");
            assert!(!in_unit(os, to_since, unit + 1, g.span_ns));
            assert!(!in_unit(os, to_since, unit - 1, g.span_ns));
            compared += 1;
        }
    }
    assert!(compared > 0, "the coarse clock ticked between every pair");
    let window_end = Layout::classic().max_timestamp();
    let deadline = clock.now_coarse_nanos().mono + clock.os_coarse_lag() + 30_000_000;
    g.open_until(Duration::from_nanos(deadline), window_end);
    assert!(g.live_since_epoch().is_some());
    g.next_id().unwrap();
    loop {
        let before = clock.now_coarse_nanos();
        let live = g.live_since_epoch().is_some();
        let after = clock.now_coarse_nanos();
        if before == after {
            assert_eq!(
                live,
                before.mono + before.behind < deadline,
                "at {before:?}"
            );
        }
        if before.mono > deadline + 10_000_000 {
            break;
        }
    }
    assert!(
        matches!(g.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("deadline"))
    );
    g.open_until(Duration::from_secs(1_000_000), window_end);
    assert!(g.next_id().is_ok());
    g.close();
    assert_eq!(g.live_since_epoch(), None, "closed: at once");
    assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
}

#[test]
fn deadlines_in_the_system_clocks_terms_are_never_later() {
    let clock = SystemClock::new();
    let lag = clock.os_coarse_lag();
    assert_eq!(clock.os_deadline(0), 0, "closed stays closed");
    assert_eq!(clock.os_deadline(lag), 0, "within the lag: not live");
    assert_eq!(clock.os_deadline(u64::MAX), u64::MAX, "open stays open");
    let origin = clock.origin_ns();
    for deadline in [lag + 1, lag + 7, 1_000_000_000, 86_400_000_000_000] {
        let os = clock.os_deadline(deadline);
        // The last reading that is live by it and the first that is not.
        for (reading, live) in [(os - 1, true), (os, false)] {
            let mono = reading.saturating_sub(origin);
            assert_eq!(
                mono + lag < deadline,
                live,
                "deadline {deadline}, reading {reading}"
            );
        }
    }
}
