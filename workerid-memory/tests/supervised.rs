//! A supervised snowflake worker on the memory store: it joins, joins again
//! after its lease is lost or while the pool is held, issues IDs that keep
//! rising across workers, and releases its worker ID when stopped.

use std::time::Duration;

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
    assert!(ids.stop(PATIENCE).await, "stopped in time");
    assert!(
        matches!(ids.next_id(), Err(NextIdError::NotReady { .. })),
        "no ID after stop"
    );
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

/// A stop whose release the store refuses is not a clean stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_whose_release_is_refused_says_so() {
    let store = MemoryStore::new();
    // Renewals far apart: the worker does not notice the loss before the
    // stop, which then releases a lease that is no longer its own.
    let slow = WorkerOptions::new()
        .renew_every(Duration::from_secs(1))
        .window(Duration::from_secs(2));
    let ids = SupervisedWorker::spawn(allocator(&store), slow);
    assert!(ids.wait_first_join(PATIENCE).await);
    // The lease taken away under the worker: its release is refused.
    let operator = allocator(&store);
    assert!(operator.force_release(0).await.unwrap());
    let taken = operator.acquire().await.expect("the freed ID");
    assert!(
        !ids.stop(PATIENCE).await,
        "a refused release is not a clean stop"
    );
    operator.release(&taken).await.unwrap();
}
