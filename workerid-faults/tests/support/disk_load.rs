//! The load the disk tests run on a store: segment reservations, acquires
//! and releases of leases, and a snowflake worker, each answer noted under
//! the phase of the test it came in.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workerid::segment::Tag;
use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, LeaseOptions, LeaseStore, Namespace};
use workerid_faults::acknowledged::{
    churn_leases_until, reserve_until, Acknowledged, Answer, Call,
};
use workerid_testkit::failing_disk::{FailingDisk, Failure};
use workerid_testkit::StoreKind;

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
    /// Successes with no verdict: calls of a store in this process in
    /// flight across its disk's shutdown ([`Load::fail`]), at most one
    /// for each of the load's two tasks.
    pub in_flight: usize,
}

/// The load's shared state.
pub struct Load {
    /// The phase the test is in, under which answers are noted.
    pub phase: Mutex<&'static str>,
    /// What the load saw.
    pub seen: Mutex<Seen>,
    /// Set to stop the load.
    pub stop: AtomicBool,
    /// When the disk of a store that runs in this process began to be
    /// shut down, and when that returned, once it did.
    shutdown_in_process: Mutex<Option<(Instant, Option<Instant>)>>,
}

impl Load {
    /// A load in phase "before".
    pub fn new() -> Arc<Load> {
        Arc::new(Load {
            phase: Mutex::new("before"),
            seen: Mutex::default(),
            stop: AtomicBool::new(false),
            shutdown_in_process: Mutex::new(None),
        })
    }

    /// Makes `disk` fail under the load, in phase "failed".
    ///
    /// A shutdown ([`Failure::Shutdown`]) lands between the system calls
    /// of the store's servers, which `FailingDisk::fail` stops, but it
    /// cannot stop this process: a store of `kind` that runs here may be
    /// told an `fsync` in flight across the shutdown succeeded and lose
    /// it. Its calls that began before the shutdown returned and were
    /// answered after it began have no verdict ([`Seen::in_flight`]);
    /// every other acknowledged call is judged.
    pub fn fail(&self, disk: &FailingDisk, kind: StoreKind) {
        *self.phase.lock().unwrap() = "failed";
        let in_process = kind.in_process() && disk.failure() == Failure::Shutdown;
        if in_process {
            *self.shutdown_in_process.lock().unwrap() = Some((Instant::now(), None));
        }
        disk.fail();
        if in_process {
            let mut shutdown = self.shutdown_in_process.lock().unwrap();
            *shutdown = shutdown.map(|(began, _)| (began, Some(Instant::now())));
        }
    }

    /// Whether `call` was in flight across the shutdown of an in-process
    /// store's disk.
    fn in_flight_across_the_shutdown(&self, call: Call) -> bool {
        match *self.shutdown_in_process.lock().unwrap() {
            None => false,
            Some((began, returned)) => {
                call.answered > began && returned.is_none_or(|returned| call.began < returned)
            }
        }
    }
}

impl Seen {
    /// Asserts what a disk that fills or fails must not break: every call
    /// that failed answered `Unavailable`, no acknowledged ranges overlap,
    /// no worker ID's fence went back, and something was served before
    /// the fault. `kind` names the store in the messages.
    pub fn assert_nothing_lost(&self, kind: impl std::fmt::Display) {
        let wrong: Vec<_> = self
            .errors
            .keys()
            .filter(|(_, kind)| !kind.ends_with("unavailable"))
            .collect();
        assert!(
            wrong.is_empty(),
            "{kind}: errors other than Unavailable: {wrong:?}"
        );
        assert_eq!(
            self.acknowledged.repeated_segment_ids(),
            0,
            "{kind}: acknowledged ranges overlap"
        );
        assert_eq!(
            self.acknowledged.fences_gone_back(),
            0,
            "{kind}: a grant's fence went back: an acknowledged grant was lost"
        );
        assert!(
            self.in_flight <= 2,
            "{kind}: {} calls in flight across the shutdown, with two tasks calling",
            self.in_flight
        );
        assert!(
            self.ok.get("before").is_some_and(|n| *n > 0),
            "{kind}: nothing was served before the disk's fault"
        );
    }
}

impl Load {
    /// Waits until 20 calls were served in `phase`, at most `within` after
    /// `since`; returns how long after `since` that was.
    ///
    /// # Panics
    /// When they were not, naming `what` (the store and the event).
    pub async fn served_again(
        &self,
        phase: &'static str,
        since: Instant,
        within: Duration,
        what: &str,
    ) -> Duration {
        loop {
            let served = self
                .seen
                .lock()
                .unwrap()
                .ok
                .get(phase)
                .copied()
                .unwrap_or(0);
            if served >= 20 {
                return since.elapsed();
            }
            if since.elapsed() >= within {
                let errors: Vec<_> = self
                    .seen
                    .lock()
                    .unwrap()
                    .errors
                    .iter()
                    .filter(|((at, _), _)| *at == phase)
                    .map(|((_, error), n)| format!("{error} ({n})"))
                    .collect();
                panic!("{what}: never served again; its errors: {errors:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Notes what a call of the load answered, under the current phase.
    pub fn note(&self, answer: Answer) {
        let phase = *self.phase.lock().unwrap();
        let mut seen = self.seen.lock().unwrap();
        match answer {
            Answer::Reserved(_, call) | Answer::Granted(_, call)
                if self.in_flight_across_the_shutdown(call) =>
            {
                seen.in_flight += 1;
                return;
            }
            Answer::Reserved(range, _) => seen.acknowledged.ranges.push(range),
            Answer::Granted(grant, _) => seen.acknowledged.grants.push(grant),
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

/// Creates the tag the load reserves from (`disk`, steps of 100).
pub async fn create_tag(store: &workerid::AnyStore) -> Tag {
    let tag = Tag::new("disk").expect("tag");
    store
        .segment_store()
        .create_tag(&tag, 1, 100)
        .await
        .expect("create the tag");
    tag
}

/// How many of `ids` repeat one before them.
pub fn repeated(ids: &[u64]) -> usize {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    ids.len() - sorted.len()
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
