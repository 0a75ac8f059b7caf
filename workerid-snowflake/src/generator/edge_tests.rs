//! The generator's edges: the epoch, the window's last unit, a batch's
//! size, the deadline's representation, the notice to leave.

use super::*;
use crate::clock::LaggingClock;
use crate::FakeClock;
use std::future::Future;

const T0: Duration = Duration::from_secs(1_800_000_000);

#[test]
fn the_epoch_itself_is_a_time_and_before_it_is_beyond_recovery() {
    let layout = Layout::classic();
    let clock = Arc::new(FakeClock::at(layout.epoch()));
    let g = Generator::new(layout, 5, clock.clone()).unwrap();
    assert_eq!(layout.decompose(g.next_id().unwrap()).timestamp, 0);
    assert_eq!(g.claim(1).unwrap().0, 0, "a claim at the epoch");
    clock.advance(Duration::from_millis(5));
    assert_eq!(layout.decompose(g.next_id().unwrap()).timestamp, 5);
    // 19.995 s before the epoch: the drift is measured to the epoch.
    clock.step_wall(-20_000);
    assert!(matches!(
        g.next_id(),
        Err(NextIdError::ClockDriftTooLarge { drift }) if drift == Duration::from_millis(19_995)
    ));
}

#[test]
fn the_windows_last_unit_is_issued() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    let ts = Layout::classic().timestamp_at(T0).unwrap();
    g.open_until(Duration::from_secs(1), ts);
    assert_eq!(
        Layout::classic().decompose(g.next_id().unwrap()).timestamp,
        ts
    );
    assert_eq!(g.claim(3).unwrap(), (ts, 1, 3), "a batch too");
    clock.advance(Duration::from_millis(1));
    assert!(
        matches!(g.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("window"))
    );
}

#[test]
fn a_batch_never_runs_past_its_units_sequence() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    let ts = Layout::classic().decompose(g.next_id().unwrap()).timestamp;
    assert_eq!(
        g.claim(u64::MAX).unwrap(),
        (ts, 1, 4095),
        "the rest of the unit"
    );
    assert_eq!(g.last_used_timestamp(), ts);
    assert_eq!(g.claim(10).unwrap(), (ts + 1, 0, 10), "then the next unit");
}

#[test]
fn batches_on_a_lagging_coarse_clock_need_no_precise_reads() {
    let clock = Arc::new(LaggingClock::at(T0));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    let (ts, _, _) = g.claim(1).unwrap();
    // The coarse clock now reads 3 ms behind, 2 ms before the last batch.
    clock.lag_ms.store(3, Ordering::SeqCst);
    clock.inner.advance(Duration::from_millis(1));
    let reads = clock.precise_reads.load(Ordering::SeqCst);
    for n in 0..10 {
        assert_eq!(g.claim(2).unwrap(), (ts, 1 + 2 * n, 2));
    }
    assert_eq!(clock.precise_reads.load(Ordering::SeqCst), reads);
}

#[test]
fn a_deadline_too_far_to_write_is_the_farthest_one_not_none() {
    let clock = Arc::new(FakeClock::at(T0));
    let g = Generator::new(Layout::classic(), 5, clock).unwrap();
    g.open_until(Duration::MAX, Layout::classic().max_timestamp());
    assert_eq!(g.lease_deadline(), Some(Duration::from_nanos(u64::MAX - 1)));
    g.open_until(Duration::ZERO, Layout::classic().max_timestamp());
    assert_eq!(g.lease_deadline(), Some(Duration::from_nanos(1)));
}

#[test]
fn a_drift_beyond_recovery_tells_the_worker_to_leave() {
    let clock = Arc::new(FakeClock::at(T0));
    let leave = Arc::new(Notify::new());
    let g = Generator::new(Layout::classic(), 5, clock.clone())
        .unwrap()
        .closed(leave.clone());
    g.open_until(Duration::from_secs(100), Layout::classic().max_timestamp());
    g.next_id().unwrap();
    clock.step_wall(-30_000);
    assert!(matches!(
        g.next_id(),
        Err(NextIdError::ClockDriftTooLarge { .. })
    ));
    let mut told = std::pin::pin!(leave.notified());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(told.as_mut().poll(&mut cx).is_ready(), "told to leave");
}

#[test]
fn a_last_used_timestamp_past_the_layout_exhausts_the_generator() {
    let layout = Layout::classic();
    let clock = Arc::new(FakeClock::at(T0));
    let g = Generator::new(layout, 5, clock.clone()).unwrap();
    let ts = layout.decompose(g.next_id().unwrap()).timestamp;
    // Past the field (one past, and a value whose shift would wrap to 0):
    // raised to the last timestamp, never wrapped below the one in use.
    for past in [layout.max_timestamp() + 1, 1 << 42] {
        g.set_last_used_timestamp(past);
        assert_eq!(g.last_used_timestamp(), layout.max_timestamp());
        assert!(g.next_id().is_err(), "no ID after the layout's last one");
        assert!(g.last_used_timestamp() > ts);
    }
}

#[test]
fn readiness_answers_as_next_id_would_without_taking_an_id() {
    let layout = Layout::classic();
    let clock = Arc::new(FakeClock::at(T0));
    let g = Generator::new(layout, 5, clock.clone()).unwrap();
    let ts = layout.timestamp_at(T0).unwrap();
    g.open_until(clock.now().mono + Duration::from_millis(20), ts + 5);
    assert_eq!(g.readiness(), Ok(()));
    let first = g.next_id().unwrap();
    for _ in 0..10_000 {
        g.readiness().unwrap();
    }
    assert_eq!(g.next_id().unwrap(), first + 1, "readiness took an ID");

    // The clock back by 2 s (try later), then by 20 s (too large): said,
    // not acted on (no notice to leave).
    clock.step_wall(-2_000);
    assert!(matches!(
        g.readiness(),
        Err(NextIdError::ClockDriftTryLater { .. })
    ));
    clock.step_wall(-18_000);
    assert!(matches!(
        g.readiness(),
        Err(NextIdError::ClockDriftTooLarge { .. })
    ));
    clock.step_wall(20_000);
    assert_eq!(g.readiness(), Ok(()));

    clock.advance(Duration::from_millis(6));
    assert!(
        matches!(g.readiness(), Err(NextIdError::NotReady { reason }) if reason.contains("window"))
    );
    assert_eq!(g.readiness(), g.next_id().map(drop));
    clock.advance(Duration::from_millis(20));
    assert!(
        matches!(g.readiness(), Err(NextIdError::NotReady { reason }) if reason.contains("deadline"))
    );
    assert_eq!(g.readiness(), g.next_id().map(drop));
    g.open_until(clock.now().mono + Duration::from_secs(1), ts + 100);
    g.seal();
    assert_eq!(g.readiness(), g.next_id().map(drop));
    assert!(g.readiness().is_err());
}
