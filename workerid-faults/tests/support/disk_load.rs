//! The load the disk tests run on a store: segment reservations, acquires
//! and releases of leases, and a snowflake worker, each answer noted under
//! the phase of the test it came in.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use workerid::segment::Tag;
use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, LeaseOptions, LeaseStore, Namespace};
use workerid_faults::acknowledged::{churn_leases_until, reserve_until, Acknowledged, Answer};

/// The leases' ttl.
pub const TTL: Duration = Duration::from_secs(2);

/// What the load saw, by phase.
#[derive(Debug, Default)]
pub struct Seen {
    /// What was acknowledged.
    pub acknowledged: Acknowledged,
    /// Errors by phase and kind.
    pub errors: BTreeMap<(&'static str, String), usize>,
    /// Successes by phase.
    pub ok: BTreeMap<&'static str, usize>,
}

/// The load's shared state.
pub struct Load {
    /// The phase the test is in, under which answers are noted.
    pub phase: Mutex<&'static str>,
    /// What the load saw.
    pub seen: Mutex<Seen>,
    /// Set to stop the load.
    pub stop: AtomicBool,
}

impl Load {
    /// A load in phase "before".
    pub fn new() -> Arc<Load> {
        Arc::new(Load {
            phase: Mutex::new("before"),
            seen: Mutex::default(),
            stop: AtomicBool::new(false),
        })
    }
}

impl Load {
    /// Notes what a call of the load answered, under the current phase.
    pub fn note(&self, answer: Answer) {
        let phase = *self.phase.lock().unwrap();
        let mut seen = self.seen.lock().unwrap();
        match answer {
            Answer::Reserved(range, _) => seen.acknowledged.ranges.push(range),
            Answer::Granted(grant) => seen.acknowledged.grants.push(grant),
            Answer::Failed(call, kind) => {
                *seen
                    .errors
                    .entry((phase, format!("{call}: {kind}")))
                    .or_default() += 1;
                return;
            }
        }
        *seen.ok.entry(phase).or_default() += 1;
    }
}

/// A snowflake worker that issues every millisecond, joining again after
/// it loses its lease; returns every ID it issued.
pub async fn worker_loop(load: Arc<Load>, store: Arc<dyn LeaseStore>) -> Vec<u64> {
    let options = LeaseOptions::new().max_worker_id(7).ttl(TTL);
    let allocator = Allocator::from_arc(store, "disk-holder", options).expect("allocator");
    let mut ids = Vec::new();
    while !load.stop.load(Ordering::Relaxed) {
        let Ok(worker) = Worker::join(allocator.clone(), WorkerOptions::new()).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        while !load.stop.load(Ordering::Relaxed) {
            match worker.next_id() {
                Ok(id) => ids.push(id),
                Err(_) if !matches!(worker.state(), WorkerState::Ready { .. }) => break,
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        worker.stop().await;
    }
    ids
}

/// Starts the load on `store` (the reservations, the lease
/// churn and a snowflake worker) until `load.stop`; each task returns the
/// snowflake IDs it issued.
pub fn start_load(
    load: &Arc<Load>,
    store: &workerid::AnyStore,
) -> Vec<tokio::task::JoinHandle<Vec<u64>>> {
    let pause = Duration::from_millis(5);
    let reserves = tokio::spawn({
        let (load, segments) = (load.clone(), store.segment_store());
        async move {
            let tag = Tag::new("disk").expect("tag");
            reserve_until(&load.stop, &*segments, &tag, pause, |a| load.note(a)).await;
            Vec::new()
        }
    });
    let leases = tokio::spawn({
        let (load, leases) = (load.clone(), store.lease_store());
        async move {
            let namespace = Namespace::new("disk-churn").expect("namespace");
            churn_leases_until(&load.stop, &*leases, &namespace, (63, TTL), pause, |a| {
                load.note(a)
            })
            .await;
            Vec::new()
        }
    });
    let worker = tokio::spawn(worker_loop(load.clone(), store.lease_store()));
    vec![reserves, leases, worker]
}
