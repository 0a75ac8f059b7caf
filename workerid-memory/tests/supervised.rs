//! A supervised snowflake worker on the memory store: it joins, joins again
//! after its lease is lost or while the pool is held, issues IDs that keep
//! rising across workers, and releases its worker ID when stopped.

use std::time::Duration;

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use support::flaky::Flaky;
use workerid_core::{Allocator, LeaseOptions};
use workerid_memory::MemoryStore;
use workerid_snowflake::{NextIdError, SupervisedWorker, SupervisorCounts, WorkerOptions};

const TTL: Duration = Duration::from_secs(2);
const PATIENCE: Duration = Duration::from_secs(10);

/// An allocator of `store`'s pool of one worker ID.
fn allocator(store: &MemoryStore) -> Allocator {
    let options = LeaseOptions::new()
        .max_worker_id(0)
        .max_lease_time(TTL)
        .ttl(TTL);
    Allocator::new(store.clone(), "supervised", options).unwrap()
}

/// Renewals every 50 ms and a short reserved window, so a rejoin waits
/// little for the window the lost worker reserved.
fn options() -> WorkerOptions {
    WorkerOptions::new()
        .renew_every(Duration::from_millis(50))
        .window(Duration::from_millis(200))
}

/// Waits until `ids` issues an ID again, and returns it.
async fn next_ready(ids: &SupervisedWorker) -> u64 {
    let until = tokio::time::Instant::now() + PATIENCE;
    loop {
        match ids.next_id() {
            Ok(id) => return id,
            Err(e) => assert!(
                tokio::time::Instant::now() < until,
                "no ID within {PATIENCE:?}: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_is_followed_by_a_new_worker_whose_ids_are_higher() {
    let store = MemoryStore::new();
    let ids = SupervisedWorker::spawn(allocator(&store), options());
    assert!(
        ids.wait_first_join(PATIENCE).await,
        "the first join succeeds"
    );
    assert_eq!(ids.status(), Ok(0));
    let first = ids.worker().expect("a current worker");
    let before: Vec<u64> = (0..1_000).map(|_| ids.next_id().unwrap()).collect();

    // An operator frees the worker ID (what `workerid release --force` does).
    let operator = allocator(&store);
    assert!(operator.force_release(0).await.unwrap(), "it was held live");
    tokio::time::timeout(PATIENCE, first.stopped())
        .await
        .expect("the worker notices at its next renewal");
    assert!(first.next_id().is_err(), "the lost worker issues no ID");

    let after = next_ready(&ids).await;
    assert!(
        after > *before.iter().max().unwrap(),
        "the new worker's IDs went back in time"
    );
    let counts = ids.counts();
    assert_eq!((counts.joins, counts.losses), (2, 1), "{counts:?}");
    assert!(ids.stop(PATIENCE).await, "stopped in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_pool_is_joined_once_freed_and_said_meanwhile_in_fixed_words() {
    let store = MemoryStore::new();
    let other = allocator(&store);
    let held = other.acquire().await.unwrap();
    let ids = SupervisedWorker::spawn(allocator(&store), options());
    assert!(
        !ids.wait_first_join(PATIENCE).await,
        "no worker while the pool is held"
    );
    let Err(NextIdError::NotReady { reason }) = ids.next_id() else {
        panic!("an ID while the pool is held");
    };
    assert!(
        reason.contains("every worker ID of the pool is held"),
        "{reason}"
    );
    assert_eq!(ids.status(), ids.next_id().map(|_| 0));

    other.release(&held).await.unwrap();
    next_ready(&ids).await;
    let counts = ids.counts();
    assert!(counts.join_failures >= 1, "{counts:?}");
    assert_eq!((counts.joins, counts.losses), (1, 0), "{counts:?}");
    assert!(ids.stop(PATIENCE).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_releases_the_worker_id_and_ends_the_ids() {
    let store = MemoryStore::new();
    let ids = SupervisedWorker::spawn(allocator(&store), options());
    assert!(ids.wait_first_join(PATIENCE).await);
    ids.next_id().unwrap();
    assert!(!ids.is_ended());
    assert!(ids.stop(PATIENCE).await, "stopped in time");
    assert!(
        matches!(ids.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("stopped")),
        "no ID after stop, and no promise of one: {:?}",
        ids.next_id()
    );
    assert!(ids.is_ended(), "a retry loop ends on it");
    assert!(ids.stop(PATIENCE).await, "a second stop returns at once");
    // Released at once, not left to expire: the next holder joins now.
    let next = allocator(&store)
        .acquire()
        .await
        .expect("the ID was released");
    assert!(next.previous_watermark() > 0, "{next:?}");
    assert_eq!(ids.counts().losses, 0, "a stop is not a loss");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_joining_returns_and_leaves_nothing_held() {
    let store = MemoryStore::new();
    let other = allocator(&store);
    let held = other.acquire().await.unwrap();
    let ids = SupervisedWorker::spawn(allocator(&store), options());
    ids.wait_first_join(PATIENCE).await;
    assert!(
        ids.stop(PATIENCE).await,
        "a stop while retrying ends at once"
    );
    other.release(&held).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        allocator(&store).acquire().await.is_ok(),
        "the stopped supervisor joined after all"
    );
    let counts: SupervisorCounts = ids.counts();
    assert_eq!((counts.joins, counts.losses), (0, 0), "{counts:?}");
}

/// A stop of a lease taken meanwhile holds nothing: a clean stop. A stop
/// whose release the store does not answer is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_says_whether_anything_is_left_held() {
    // Renewals far apart: the worker does not notice the loss before the
    // stop.
    let slow = || {
        WorkerOptions::new()
            .renew_every(Duration::from_secs(1))
            .window(Duration::from_secs(2))
    };
    let store = MemoryStore::new();
    let ids = SupervisedWorker::spawn(allocator(&store), slow());
    assert!(ids.wait_first_join(PATIENCE).await);
    let operator = allocator(&store);
    assert!(operator.force_release(0).await.unwrap());
    let taken = operator.acquire().await.expect("the freed ID");
    assert!(
        ids.stop(PATIENCE).await,
        "a lease no longer ours is not left held"
    );
    operator.release(&taken).await.unwrap();

    let store = Flaky::new(false);
    let options = LeaseOptions::new()
        .max_worker_id(0)
        .max_lease_time(TTL)
        .ttl(TTL);
    let allocator = Allocator::from_arc(store.clone(), "supervised", options).unwrap();
    let ids = SupervisedWorker::spawn(allocator, slow());
    assert!(ids.wait_first_join(PATIENCE).await);
    store.down.store(true, Ordering::SeqCst);
    assert!(
        !ids.stop(PATIENCE).await,
        "an unanswered release is not a clean stop"
    );
}

/// After a loss, the next worker may hold another worker ID, whose
/// watermark is older; with the wall clock stepped back meanwhile, its IDs
/// still start above the lost worker's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_worker_on_another_id_issues_above_the_last_one_whatever_the_clock() {
    use workerid_snowflake::FakeClock;

    let store = MemoryStore::new();
    let pool_of_two = || {
        let options = LeaseOptions::new()
            .max_worker_id(1)
            .max_lease_time(TTL)
            .ttl(TTL);
        Allocator::new(store.clone(), "two", options).unwrap()
    };
    let operator = pool_of_two();
    let other = operator.acquire().await.unwrap();
    let clock = Arc::new(FakeClock::at(Duration::from_secs(1_800_000_000)));
    let ids = SupervisedWorker::spawn(pool_of_two(), options().clock(clock.clone()));
    assert!(ids.wait_first_join(PATIENCE).await);
    let first = ids.worker().expect("a worker");
    assert_ne!(first.worker_id(), other.id().get());
    clock.advance(Duration::from_millis(5));
    let last = ids.next_id().unwrap();

    // The wall clock goes back half a second; the worker's ID is taken,
    // and the only free one is the other.
    clock.step_wall(-500);
    assert!(operator
        .force_release(u64::from(first.worker_id()))
        .await
        .unwrap());
    let taken = operator.acquire().await.expect("the freed ID");
    assert_eq!(taken.id().get(), first.worker_id());
    operator.release(&other).await.unwrap();
    first.stopped().await;

    // The next worker waits out the half second rather than go back.
    let next = loop {
        clock.advance(Duration::from_millis(10));
        if let Ok(id) = ids.next_id() {
            break id;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let worker = ids.worker().expect("the next worker");
    assert_eq!(worker.worker_id(), other.id().get(), "the other worker ID");
    assert!(next > last, "{next} after {last}: back in time");
    assert!(ids.stop(PATIENCE).await);
}

/// A join its settings make fail whenever it is tried (a pool wider than
/// the layout's worker bits; the namespace's pool recorded as another
/// size) is tried once, not again and again: the supervisor ends and says
/// why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_its_settings_refuse_is_not_tried_again() {
    let store = MemoryStore::new();
    let wide = LeaseOptions::new()
        .max_worker_id(1023)
        .max_lease_time(TTL)
        .ttl(TTL);
    let layouts = [
        (
            Allocator::new(store.clone(), "too-wide", wide.clone()).unwrap(),
            options().layout(workerid_snowflake::Layout::javascript_safe()),
            "worker bits",
        ),
        // The namespace "supervised" holds a pool of one; this asks 1024.
        (
            Allocator::new(store.clone(), "supervised", wide).unwrap(),
            options(),
            "created with max_worker_id 0",
        ),
    ];
    allocator(&store).acquire().await.unwrap();
    for (allocator, options, said) in layouts {
        let ids = SupervisedWorker::spawn(allocator, options);
        assert!(!ids.wait_first_join(PATIENCE).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(ids.is_ended());
        assert_eq!(ids.counts().join_failures, 1, "tried once");
        let error = ids.last_join_error().expect("the join's error");
        assert!(error.contains(said), "{error}");
        assert!(
            matches!(ids.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("settings")),
            "{:?}",
            ids.next_id()
        );
        assert!(ids.stop(PATIENCE).await, "nothing was held");
    }
}
