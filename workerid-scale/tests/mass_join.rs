//! Many workers joining at once, each on a just-released worker ID (so each
//! waits for the clock to pass its previous holder's window), all succeed:
//! the waits are runtime timers, not blocked threads. With the waits on the
//! runtime's few blocking threads they queued past the lease's ttl and the
//! joins failed with `TokenExpired` (found by the scale run).

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use workerid::snowflake::{Worker, WorkerOptions};
use workerid::{Allocator, LeaseOptions};

const WORKERS: usize = 40;

async fn join_all(allocator: &Allocator) -> Vec<Worker> {
    stream::iter(0..WORKERS)
        .map(|_| Worker::join(allocator.clone(), WorkerOptions::new()))
        .buffer_unordered(WORKERS)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(|joined| joined.expect("join"))
        .collect()
}

#[test]
fn joins_that_wait_do_not_queue_on_blocking_threads() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let ttl = Duration::from_secs(2);
        let options = LeaseOptions::new()
            .worker_bits(6)
            .max_lease_time(ttl)
            .ttl(ttl);
        let store = Arc::new(workerid::memory::MemoryStore::new());
        let allocator = Allocator::from_arc(store, "mass", options).expect("allocator");
        for worker in join_all(&allocator).await {
            worker.stop().await;
        }
        // Every ID was just released with a window reserved ahead: each of
        // these joins waits, all at once.
        let again = join_all(&allocator).await;
        assert_eq!(again.len(), WORKERS);
        for worker in again {
            worker.stop().await;
        }
    });
}
