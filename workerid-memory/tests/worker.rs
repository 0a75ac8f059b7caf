//! The snowflake worker on the memory store: hand-over of a reused worker ID
//! between clocks that disagree, lease loss during a store outage, stop,
//! leaving on a clock drift beyond recovery, the default reserved window, and
//! what a failed join leaves behind.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::flaky::Flaky;
use workerid_core::{Allocator, Error, LeaseOptions, LeaseStore, Result};
use workerid_memory::{ManualClock, MemoryStore};
use workerid_snowflake::{
    Clock, Error as SnowflakeError, FakeClock, Layout, NextIdError, SystemClock, Worker,
    WorkerOptions, WorkerState,
};

const T0: Duration = Duration::from_secs(1_800_000_000);

/// A pool of one worker ID, leased for `ttl`.
fn lease_options(ttl: Duration) -> LeaseOptions {
    LeaseOptions::new()
        .max_worker_id(0)
        .max_lease_time(ttl)
        .ttl(ttl)
}

fn allocator(store: impl LeaseStore, ttl: Duration) -> Allocator {
    Allocator::new(store, "snowflake", lease_options(ttl)).unwrap()
}

/// A worker on `store`'s pool of one, with `clock`.
async fn join_on(
    store: &MemoryStore,
    ttl: Duration,
    clock: &Arc<FakeClock>,
) -> Result<Worker, SnowflakeError> {
    let options = WorkerOptions::new().clock(clock.clone());
    Worker::join(allocator(store.clone(), ttl), options).await
}

fn ids(worker: &Worker, clock: &FakeClock, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            clock.advance(Duration::from_micros(100));
            worker.next_id().unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_worker_id_never_goes_back_in_time_even_with_a_clock_behind() {
    let store = MemoryStore::new();
    let ttl = Duration::from_secs(30);
    let first_clock = Arc::new(FakeClock::at(T0));
    let first = join_on(&store, ttl, &first_clock).await.unwrap();
    let before = ids(&first, &first_clock, 5_000);
    assert_eq!(first.stop().await, WorkerState::Stopped);
    assert!(
        matches!(first.next_id(), Err(NextIdError::NotReady { .. })),
        "no IDs after stop"
    );

    // The next holder's clock is 5 s behind: it waits (virtually) until it is
    // past the first holder's reserved window, then issues higher IDs.
    let second_clock = Arc::new(FakeClock::at(T0 - Duration::from_secs(5)));
    let second = join_on(&store, ttl, &second_clock).await.unwrap();
    assert_eq!(
        second.worker_id(),
        first.worker_id(),
        "a pool of one: the same worker ID"
    );
    assert!(
        second.fence() > first.fence(),
        "the next grant has a higher fence, readable after the first stopped"
    );
    // The lease deadline and reserved window an observer can read.
    let deadline = second.generator().lease_deadline().unwrap();
    assert!(deadline > second_clock.now().mono && deadline <= second_clock.now().mono + ttl);
    let window = second.generator().window_end();
    assert!(
        window
            >= Layout::classic()
                .timestamp_at(second_clock.now().wall)
                .unwrap()
    );
    let after = ids(&second, &second_clock, 5_000);
    let highest_before = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|id| *id > highest_before),
        "IDs went back in time across holders"
    );
    let mut all: Vec<u64> = before.into_iter().chain(after).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs across holders");
}

/// A worker that stops leaves the last timestamp it issued, not the window
/// its renewals reserved: the next holder of the worker ID, its clock at the
/// same instant, starts within a millisecond instead of waiting the window
/// out, and still issues only higher IDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_hand_over_needs_no_wait_for_the_reserved_window() {
    let store = MemoryStore::new();
    let ttl = Duration::from_secs(30);
    let first_clock = Arc::new(FakeClock::at(T0));
    let first = join_on(&store, ttl, &first_clock).await.unwrap();
    let before = ids(&first, &first_clock, 1_000);
    assert!(
        first.generator().window_end()
            > Layout::classic()
                .timestamp_at(first_clock.now().wall + ttl / 3)
                .unwrap(),
        "the first holder reserved more than a renewal period ahead"
    );
    first.stop().await;

    let second_clock = Arc::new(FakeClock::at(first_clock.now().wall));
    let started = second_clock.now().wall;
    let second = join_on(&store, ttl, &second_clock).await.unwrap();
    let waited = second_clock.now().wall - started;
    assert!(
        waited <= Duration::from_millis(1),
        "the next holder waited {waited:?} (on its clock) for a window never used"
    );
    let after = ids(&second, &second_clock, 1_000);
    let highest_before = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|id| *id > highest_before),
        "went back in time"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_far_behind_the_watermark_gives_up_and_releases() {
    let store = MemoryStore::new();
    let ttl = Duration::from_secs(30);
    let clock = Arc::new(FakeClock::at(T0));
    let first = join_on(&store, ttl, &clock).await.unwrap();
    first.next_id().unwrap();
    first.stop().await;
    let behind = Arc::new(FakeClock::at(T0 - Duration::from_secs(3_600)));
    let joined = join_on(&store, ttl, &behind).await;
    assert!(
        matches!(joined, Err(SnowflakeError::ClockDriftTooLarge { .. })),
        "{joined:?}"
    );
    // It released the worker ID it could not use.
    allocator(store, ttl)
        .acquire()
        .await
        .expect("the worker ID is free again");
}

/// A join stopped while it waits for the previous holder's window (a
/// shutdown) releases the worker ID before it returns; so does a join whose
/// future is dropped, a moment later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_stopped_or_dropped_while_waiting_releases_the_worker_id() {
    let store = MemoryStore::new();
    let ttl = Duration::from_secs(30);
    // A holder that issued timestamps up to 20 s ahead of the real clock:
    // the next one waits.
    let ahead = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        + Duration::from_secs(20);
    let first = allocator(store.clone(), ttl).acquire().await.unwrap();
    allocator(store.clone(), ttl)
        .release_with_watermark(&first, u64::try_from(ahead.as_millis()).unwrap())
        .await
        .unwrap();
    let stopped = Worker::join_until(
        allocator(store.clone(), ttl),
        WorkerOptions::new(),
        tokio::time::sleep(Duration::from_millis(50)),
    )
    .await;
    assert!(
        matches!(stopped, Err(SnowflakeError::NotReady { .. })),
        "{stopped:?}"
    );
    let lease = allocator(store.clone(), ttl)
        .acquire()
        .await
        .expect("released by the stopped join");
    allocator(store.clone(), ttl).release(&lease).await.unwrap();

    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        Worker::join(allocator(store.clone(), ttl), WorkerOptions::new()),
    )
    .await;
    assert!(dropped.is_err(), "the join was still waiting");
    let started = Instant::now();
    loop {
        match allocator(store.clone(), ttl).acquire().await {
            Ok(_) => break,
            Err(Error::NoAvailableId { .. }) if started.elapsed() < Duration::from_secs(2) => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            Err(e) => panic!("the dropped join's worker ID is not released: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_beyond_recovery_makes_the_worker_leave() {
    let store = MemoryStore::new();
    let ttl = Duration::from_secs(30);
    let clock = Arc::new(FakeClock::at(T0));
    let worker = join_on(&store, ttl, &clock).await.unwrap();
    worker.next_id().unwrap();
    clock.step_wall(-60_000);
    assert!(matches!(
        worker.next_id(),
        Err(NextIdError::ClockDriftTooLarge { .. })
    ));
    assert_eq!(
        worker.stopped().await,
        WorkerState::Stopped,
        "the worker left"
    );
    let next = allocator(store, ttl)
        .acquire()
        .await
        .expect("and released its worker ID");
    assert!(next.previous_watermark() > 0, "with its watermark");
}

/// A stop whose release the store does not take says so: the worker ID is
/// left to expire, and the caller can tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_the_store_does_not_take_says_the_id_was_not_released() {
    let store = Flaky::new(false);
    let allocator = Allocator::from_arc(
        store.clone(),
        "unreleased",
        lease_options(Duration::from_secs(30)),
    )
    .unwrap();
    let worker = Worker::join(allocator, WorkerOptions::new()).await.unwrap();
    worker.next_id().unwrap();
    store.down.store(true, Ordering::SeqCst);
    let state = worker.stop().await;
    assert!(
        matches!(&state, WorkerState::StoppedUnreleased { reason } if reason.contains("cut off")),
        "{state:?}"
    );
    assert!(state.is_final());
    assert!(
        worker.next_id().is_err(),
        "no ID after a stop, released or not"
    );
}

/// Without a window in its options a worker reserves four renewal periods
/// ahead, or two ttls on a store that holds expired IDs back one more ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_window_is_two_ttls_where_expired_ids_are_held_back() {
    let ttl = Duration::from_secs(30);
    for (quarantine, window) in [(false, ttl / 3 * 4), (true, ttl * 2)] {
        let store = Flaky::new(quarantine);
        let allocator = Allocator::from_arc(store, "window", lease_options(ttl)).unwrap();
        let clock = Arc::new(FakeClock::at(T0));
        let worker = Worker::join(allocator, WorkerOptions::new().clock(clock.clone()))
            .await
            .unwrap();
        let now = Layout::classic().timestamp_at(clock.now().wall).unwrap();
        assert_eq!(
            Duration::from_millis(worker.generator().window_end() - now),
            window,
            "quarantine: {quarantine}"
        );
        worker.stop().await;
    }
}

/// A join whose first reservation was written but not confirmed issued no
/// ID: it leaves the earlier holder's watermark, not the window it reserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_join_leaves_the_earlier_watermark() {
    let ttl = Duration::from_secs(30);
    let store = Flaky::new(false);
    let allocator = Allocator::from_arc(store.clone(), "failed", lease_options(ttl)).unwrap();
    let earlier = u64::try_from(T0.as_millis()).unwrap();
    let first = allocator.acquire().await.unwrap();
    allocator
        .release_with_watermark(&first, earlier)
        .await
        .unwrap();

    store.lose_raises.store(true, Ordering::SeqCst);
    let clock = Arc::new(FakeClock::at(T0 + Duration::from_secs(1)));
    let joined = Worker::join(allocator.clone(), WorkerOptions::new().clock(clock)).await;
    assert!(joined.is_err(), "the reservation's answer was lost");
    let next = allocator.acquire().await.unwrap();
    assert_eq!(next.previous_watermark(), earlier);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_longer_than_the_ttl_stops_ids_before_the_deadline() {
    let ttl = Duration::from_millis(900);
    let flaky = Flaky::new(false);
    let allocator = Allocator::from_arc(flaky.clone(), "outage", lease_options(ttl)).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let worker = Worker::join(allocator, WorkerOptions::new().clock(clock))
        .await
        .unwrap();

    tokio::time::sleep(Duration::from_millis(700)).await; // at least one renewal
    flaky.down.store(true, Ordering::SeqCst);
    let mut issued_at = Vec::new();
    let started = Instant::now();
    loop {
        match worker.next_id() {
            Ok(_) => issued_at.push(Instant::now()),
            Err(NextIdError::NotReady { .. }) => break,
            Err(e) => panic!("unexpected: {e}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "IDs never stopped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let last_renewal = *flaky
        .renewed
        .lock()
        .unwrap()
        .last()
        .expect("a renewal before the outage");
    let deadline = last_renewal + ttl;
    let last_id = *issued_at
        .last()
        .expect("IDs during the outage, until the deadline");
    assert!(
        last_id < deadline,
        "an ID was issued {:?} after the deadline",
        last_id - deadline
    );
    let state = tokio::time::timeout(Duration::from_secs(5), worker.stopped())
        .await
        .unwrap();
    assert!(matches!(state, WorkerState::Lost { .. }), "{state:?}");
}

/// An outage shorter than the lease's deadline is ridden out: the failed
/// renewals are retried (every 50 ms, as set), the worker stays ready and
/// renews again after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_shorter_than_the_deadline_is_ridden_out() {
    let ttl = Duration::from_secs(3);
    let flaky = Flaky::new(false);
    let allocator = Allocator::from_arc(flaky.clone(), "short", lease_options(ttl)).unwrap();
    let options = WorkerOptions::new().retry_every(Duration::from_millis(50));
    let worker = Worker::join(allocator, options).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await; // one renewal
                                                            // Down from 1.2 s to 2.8 s: the renewal due at 2.2 s fails, and is
                                                            // retried until the store is back, well before the deadline (4 s).
    flaky.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    flaky.down.store(false, Ordering::SeqCst);
    let back = Instant::now();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        matches!(worker.state(), WorkerState::Ready { .. }),
        "{:?}",
        worker.state()
    );
    worker.next_id().expect("still issuing after the outage");
    let refused = flaky.refused.load(Ordering::SeqCst);
    // About 600 ms of retries, one per 50 ms; the default (200 ms) makes 3 or 4.
    assert!(refused >= 7, "{refused} renewals tried during the outage");
    assert!(
        flaky.renewed.lock().unwrap().iter().any(|at| *at >= back),
        "a renewal went through after the outage"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_keep_a_worker_issuing_and_dropping_it_releases() {
    let store = MemoryStore::with_clock(Arc::new(ManualClock::new()));
    let ttl = Duration::from_millis(600);
    let worker = Worker::join(allocator(store.clone(), ttl), WorkerOptions::new())
        .await
        .unwrap();
    let joined = Instant::now();
    let until = joined + Duration::from_millis(2_000);
    let mut last_issue = joined;
    while Instant::now() < until {
        worker
            .next_id()
            .expect("renewals keep the worker ready past its first ttl");
        last_issue = Instant::now();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // However slow the machine, the loop issued IDs well past two ttls.
    assert!(last_issue - joined > 2 * ttl, "{:?}", last_issue - joined);
    let layout = Layout::classic();
    let last_ts = worker.generator().last_used_timestamp();
    drop(worker);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match allocator(store.clone(), ttl).acquire().await {
            Ok(lease) => {
                let last_ms = layout.time_of(last_ts).as_millis() as u64;
                assert!(
                    lease.previous_watermark() >= last_ms,
                    "the released watermark covers the last ID"
                );
                break;
            }
            Err(Error::NoAvailableId { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("dropping the worker must release its ID: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_release_makes_the_worker_leave_and_the_next_holder_go_on_higher() {
    let store = MemoryStore::new();
    let ttl = Duration::from_secs(30);
    let clock = Arc::new(FakeClock::at(T0));
    let first = Worker::join(
        allocator(store.clone(), ttl),
        WorkerOptions::new()
            .clock(clock.clone())
            .renew_every(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    let before = ids(&first, &clock, 1_000);

    // An operator frees the stuck worker ID (what `workerid release --force` does).
    let operator = allocator(store.clone(), ttl);
    assert!(operator.force_release(0).await.unwrap(), "it was held live");
    let state = tokio::time::timeout(Duration::from_secs(10), first.stopped())
        .await
        .expect("the worker notices at its next renewal");
    assert!(matches!(state, WorkerState::Lost { .. }), "{state:?}");
    assert!(first.next_id().is_err(), "no IDs once the lease is lost");

    let second = join_on(&store, ttl, &clock).await.unwrap();
    let after = ids(&second, &clock, 1_000);
    let highest_before = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|id| *id > highest_before),
        "IDs went back in time after a forced release"
    );
}

/// A pool of `max_worker_id + 1` IDs, each released with `watermark`.
async fn pool_with_watermark(store: &MemoryStore, max_worker_id: u32, watermark: u64) -> Allocator {
    let ttl = Duration::from_secs(30);
    let options = LeaseOptions::new()
        .max_worker_id(max_worker_id)
        .max_lease_time(ttl)
        .ttl(ttl);
    let allocator = Allocator::new(store.clone(), "snowflake", options).unwrap();
    let mut held = Vec::new();
    for _ in 0..=max_worker_id {
        held.push(allocator.acquire().await.unwrap());
    }
    for lease in &held {
        allocator
            .release_with_watermark(lease, watermark)
            .await
            .unwrap();
    }
    allocator
}

/// A worker ID whose watermark is far ahead of the clock (a client of the
/// lease API wrote it in another unit) is passed over, not waited on and
/// not taken again by every join: the join takes another ID, and the one
/// passed over is free again with its watermark kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_id_with_a_watermark_far_ahead_is_passed_over() {
    let store = MemoryStore::new();
    let two = pool_with_watermark(&store, 1, 0).await;
    // ID 0, free longest, is the one the memory store offers first.
    let first = two.acquire().await.unwrap();
    let second = two.acquire().await.unwrap();
    assert_eq!((first.id().get(), second.id().get()), (0, 1));
    two.release_with_watermark(&first, u64::MAX).await.unwrap();
    two.release_with_watermark(&second, 1).await.unwrap();

    let clock = Arc::new(FakeClock::at(T0));
    let worker = Worker::join(two.clone(), WorkerOptions::new().clock(clock.clone()))
        .await
        .expect("joins on the other worker ID");
    assert_eq!(worker.worker_id(), 1);
    worker.next_id().unwrap();
    let again = two.acquire().await.expect("the ID passed over is free");
    assert_eq!(again.id().get(), 0);
    assert_eq!(
        again.previous_watermark(),
        u64::MAX,
        "its watermark is kept"
    );
    worker.stop().await;
}

/// When every ID offered is too far ahead, the join gives up with
/// `ClockDriftTooLarge` after passing over a few, and leaves every one of
/// them free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_offered_only_ids_far_ahead_gives_up_and_frees_them() {
    let store = MemoryStore::new();
    let ahead = u64::try_from((T0 + Duration::from_secs(3_600)).as_millis()).unwrap();
    let allocator = pool_with_watermark(&store, 31, ahead).await;
    let clock = Arc::new(FakeClock::at(T0));
    let joined = Worker::join(allocator.clone(), WorkerOptions::new().clock(clock)).await;
    assert!(
        matches!(joined, Err(SnowflakeError::ClockDriftTooLarge { .. })),
        "{:?}",
        joined.map(|w| w.worker_id())
    );
    for _ in 0..32 {
        let lease = allocator.acquire().await.expect("every ID is free again");
        assert_eq!(lease.previous_watermark(), ahead);
    }
}
