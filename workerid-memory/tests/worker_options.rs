//! The snowflake worker's options: each one checked before any lease is
//! taken, and each one taking effect.

use std::sync::Arc;
use std::time::Duration;

use workerid_core::{Allocator, LeaseOptions};
use workerid_memory::MemoryStore;
use workerid_snowflake::{
    Clock, DriftPolicy, Error as SnowflakeError, FakeClock, Layout, NextIdError, Worker,
    WorkerOptions,
};

const T0: Duration = Duration::from_secs(1_800_000_000);
const TTL: Duration = Duration::from_secs(30);

/// An allocator in a namespace of its own for each pool size.
fn allocator(store: &MemoryStore, options: LeaseOptions) -> Allocator {
    let options = options.max_lease_time(TTL).ttl(TTL);
    let probe = Allocator::new(store.clone(), "options", options.clone()).unwrap();
    let namespace = format!("options.{}", probe.max_worker_id());
    Allocator::new(store.clone(), &namespace, options).unwrap()
}

fn at(clock: &Arc<FakeClock>) -> WorkerOptions {
    WorkerOptions::new().clock(clock.clone())
}

async fn nothing_leased(store: &MemoryStore) -> bool {
    allocator(store, LeaseOptions::new().max_worker_id(0))
        .list()
        .await
        .unwrap()
        .leases
        .is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_that_cannot_work_are_refused_before_any_lease() {
    let store = MemoryStore::new();
    let clock = Arc::new(FakeClock::at(T0));
    let refused = |joined: Result<Worker, SnowflakeError>| {
        matches!(joined, Err(SnowflakeError::InvalidConfig { .. }))
    };
    // The classic layout holds 10 worker bits: a pool of 11 does not fit.
    let wide = allocator(&store, LeaseOptions::new().worker_bits(11));
    assert!(refused(Worker::join(wide, at(&clock)).await));
    let period = TTL / 3;
    for (renew_every, window) in [
        (Duration::ZERO, TTL),
        (TTL, TTL * 2),
        (period, period * 2 - Duration::from_millis(1)),
        (period, period * 3 / 2),
    ] {
        let options = at(&clock).renew_every(renew_every).window(window);
        let joined = Worker::join(
            allocator(&store, LeaseOptions::new().max_worker_id(0)),
            options,
        )
        .await;
        assert!(
            refused(joined),
            "renew every {renew_every:?} with a window of {window:?} must be refused"
        );
    }
    // Periods far too long are refused, never an overflow: a renewal
    // period past the ttl with the default window, and a window longer
    // than the layout's timestamp field (the next holder would never start).
    let one = || allocator(&store, LeaseOptions::new().max_worker_id(0));
    assert!(refused(
        Worker::join(one(), at(&clock).renew_every(Duration::MAX)).await
    ));
    assert!(refused(
        Worker::join(one(), at(&clock).window(Duration::MAX)).await
    ));
    let past_the_field = Layout::classic().span() + Duration::from_millis(1);
    assert!(refused(
        Worker::join(one(), at(&clock).window(past_the_field)).await
    ));
    assert!(
        nothing_leased(&store).await,
        "a refused join takes no lease"
    );
    // A drift policy that never gives up is a policy, not an overflow.
    let never = DriftPolicy {
        block_below: Duration::from_secs(1),
        give_up_at: Duration::MAX,
    };
    let worker = Worker::join(one(), at(&clock).drift(never))
        .await
        .expect("a join with a give-up point that never comes");
    worker.stop().await;

    // At the limits: a pool as wide as the layout, a window of two periods.
    let exact = allocator(&store, LeaseOptions::new().worker_bits(10));
    let options = at(&clock).renew_every(period).window(period * 2);
    let worker = Worker::join(exact, options)
        .await
        .expect("a join at the limits");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_option_takes_effect() {
    let store = MemoryStore::new();
    let clock = Arc::new(FakeClock::at(T0));

    // The layout: 16 worker bits take a pool the classic layout cannot.
    let sonyflake = Layout::sonyflake();
    let wide = allocator(&store, LeaseOptions::new().worker_bits(16));
    // Two IDs held first: the worker's is neither 0 nor 1.
    let _held = (wide.acquire().await.unwrap(), wide.acquire().await.unwrap());
    let worker = Worker::join(wide, at(&clock).layout(sonyflake))
        .await
        .expect("a 16-bit pool on a 16-bit layout");
    let id = worker.next_id().unwrap();
    assert_eq!(worker.worker_id(), 2);
    assert_eq!(sonyflake.decompose(id).worker_id, 2);
    worker.stop().await;

    // The window: reserved that far ahead of the clock, not the default.
    let window = Duration::from_secs(25);
    let one = || allocator(&store, LeaseOptions::new().max_worker_id(0));
    let worker = Worker::join(one(), at(&clock).window(window))
        .await
        .unwrap();
    let reserved = worker.generator().window_end();
    let classic = Layout::classic();
    assert!(
        reserved <= classic.timestamp_at(clock.now().wall + window).unwrap(),
        "reserved up to {reserved}, past the window of {window:?}"
    );
    worker.next_id().unwrap();

    // The drift policy: a step back of 3 s is beyond a 2 s allowance (the
    // default gives up at 10 s only).
    let drift = DriftPolicy {
        block_below: Duration::from_millis(500),
        give_up_at: Duration::from_secs(2),
    };
    worker.stop().await;
    let worker = Worker::join(one(), at(&clock).drift(drift)).await.unwrap();
    worker.next_id().unwrap();
    clock.step_wall(-3_000);
    assert!(matches!(
        worker.next_id(),
        Err(NextIdError::ClockDriftTooLarge { .. })
    ));
    worker.stopped().await;

    // The longest start wait: the next holder's clock is 5 s behind the
    // watermark left; it may wait 1 s only, so it gives up (the default
    // would wait it out).
    let behind = Arc::new(FakeClock::at(clock.now().wall - Duration::from_secs(5)));
    // The clock is set last: an option that dropped the others would be
    // seen here.
    let options = WorkerOptions::new()
        .max_start_wait(Duration::from_secs(1))
        .clock(behind.clone());
    let joined = Worker::join(one(), options).await;
    assert!(
        matches!(joined, Err(SnowflakeError::ClockDriftTooLarge { .. })),
        "a start wait of 5 s is past the 1 s allowed: {:?}",
        joined.map(|w| w.worker_id())
    );
    let waited = Worker::join(one(), at(&behind))
        .await
        .expect("the default waits");
    waited.stop().await;
}

/// The next holder starts strictly after the watermark it was handed: a
/// clock at exactly that millisecond waits one more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_at_the_watermark_waits_past_it() {
    let store = MemoryStore::new();
    let one = allocator(&store, LeaseOptions::new().max_worker_id(0));
    let watermark = u64::try_from(T0.as_millis()).unwrap();
    let first = one.acquire().await.unwrap();
    one.release_with_watermark(&first, watermark).await.unwrap();
    let clock = Arc::new(FakeClock::at(T0));
    let worker = Worker::join(one, at(&clock)).await.unwrap();
    assert!(
        clock.now().wall > T0,
        "started at {:?}, on the watermark's millisecond",
        clock.now().wall
    );
    let issued = Layout::classic().decompose(worker.next_id().unwrap());
    assert!(Layout::classic().time_of(issued.timestamp) > T0);
    worker.stop().await;
}

/// A start wait exactly as long as allowed is waited out, not given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_wait_of_exactly_the_allowance_is_waited_out() {
    let store = MemoryStore::new();
    let one = allocator(&store, LeaseOptions::new().max_worker_id(0));
    let watermark = u64::try_from(T0.as_millis()).unwrap();
    let first = one.acquire().await.unwrap();
    one.release_with_watermark(&first, watermark).await.unwrap();
    // One second to the watermark's millisecond, and one more to pass it.
    let clock = Arc::new(FakeClock::at(T0 - Duration::from_millis(999)));
    let options = WorkerOptions::new()
        .max_start_wait(Duration::from_secs(1))
        .clock(clock.clone());
    let worker = Worker::join(one, options)
        .await
        .expect("a wait within the allowance");
    assert!(clock.now().wall > T0);
    worker.stop().await;
}
