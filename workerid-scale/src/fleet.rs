//! A fleet of live snowflake workers on one shared store handle: each a real
//! [`Worker`] with its own keeper task and lease, spread over several
//! namespaces (one namespace holds at most 2^worker_bits IDs), filled one
//! after the other.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use workerid::snowflake::Error as JoinError;
use workerid::snowflake::{Layout, Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, LeaseOptions, LeaseStore};

use crate::histogram::Histogram;
use crate::Error;

/// How a [`Fleet`] leases.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The lease ttl (the workers renew every ttl/3).
    pub ttl: Duration,
    /// Bits of a worker ID: each namespace holds 2^bits IDs (1..=16).
    pub worker_bits: u8,
    /// How many namespaces the workers are spread over.
    pub namespaces: usize,
    /// Workers per namespace: slot `i` leases from namespace `i / per_namespace`.
    pub per_namespace: usize,
    /// The namespaces are `<prefix>.0`, `<prefix>.1`, ...
    pub prefix: String,
    /// How many joins (or stops) are in flight at once.
    pub concurrency: usize,
    /// How far ahead each worker reserves time, in renew periods (see
    /// `WorkerOptions::window`); `None`: the worker's default.
    pub window_periods: Option<u32>,
}

/// What one churn cycle did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cycle {
    /// Workers stopped (each released its worker ID).
    pub stopped: usize,
    /// Joins started in their place (they finish in the background).
    pub joining: usize,
    /// How long the stops took, all together.
    pub stop_time: Duration,
}

/// A join running in the background: the slot it fills, and its outcome.
type Joining = (usize, Result<Worker, JoinError>);

/// Live workers, each in a slot; slot `i` leases from namespace
/// `i / per_namespace`.
#[derive(Debug)]
pub struct Fleet {
    allocators: Vec<Allocator>,
    per_namespace: usize,
    options: WorkerOptions,
    slots: Vec<Option<Worker>>,
    concurrency: usize,
    /// Joins in the background (churn), limited by `permits`.
    pending: JoinSet<Joining>,
    pending_slots: HashSet<usize>,
    permits: Arc<Semaphore>,
    /// Latency of each join (acquire, wait past the previous holder's
    /// watermark, first renewal).
    pub joins: Arc<Histogram>,
    /// Joins completed so far.
    pub joined: u64,
    /// Workers found in state `Lost` so far (their lease lapsed or was taken).
    pub lapses: u64,
    /// The first few reasons workers gave for being lost.
    pub lapse_reasons: Vec<String>,
    /// Joins that failed even after retries.
    pub join_failures: u64,
    /// The first few join errors.
    pub join_errors: Vec<String>,
}

/// A layout whose worker field holds `bits`.
fn layout(bits: u8) -> Result<Layout, Error> {
    match bits {
        1..=10 => Ok(Layout::classic()),
        11..=16 => Ok(Layout::sonyflake()),
        _ => Err(Error::Config(format!(
            "worker bits {bits}: the scale run takes 1 to 16"
        ))),
    }
}

const KEEP_REASONS: usize = 3;

impl Fleet {
    /// A fleet with no workers yet, on `store` (shared by every worker).
    ///
    /// # Errors
    /// [`Error::Config`] for bits or a ttl the store refuses.
    pub fn new(store: Arc<dyn LeaseStore>, config: &FleetConfig) -> Result<Fleet, Error> {
        let options = LeaseOptions::new()
            .worker_bits(config.worker_bits)
            .max_lease_time(config.ttl.max(Duration::from_secs(60)))
            .ttl(config.ttl);
        let allocators = (0..config.namespaces.max(1))
            .map(|i| {
                Allocator::from_arc(
                    store.clone(),
                    &format!("{}.{i}", config.prefix),
                    options.clone(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let options = WorkerOptions::new().layout(layout(config.worker_bits)?);
        Ok(Fleet {
            allocators,
            per_namespace: config.per_namespace.max(1),
            options: match config.window_periods {
                Some(periods) => options.window(config.ttl / 3 * periods),
                None => options,
            },
            slots: Vec::new(),
            concurrency: config.concurrency.max(1),
            pending: JoinSet::new(),
            pending_slots: HashSet::new(),
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            joins: Arc::new(Histogram::default()),
            joined: 0,
            lapses: 0,
            lapse_reasons: Vec::new(),
            join_failures: 0,
            join_errors: Vec::new(),
        })
    }

    /// The allocator of slot `i`'s namespace.
    fn allocator(&self, i: usize) -> &Allocator {
        let last = self.allocators.len() - 1;
        &self.allocators[(i / self.per_namespace).min(last)]
    }

    /// How many slots (live workers, plus any whose join failed).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the fleet has no slots.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many workers are live (state `Ready`).
    pub fn ready(&self) -> usize {
        self.slots
            .iter()
            .flatten()
            .filter(|w| matches!(w.state(), WorkerState::Ready { .. }))
            .count()
    }

    /// Adds slots up to `n` and joins a worker in every empty slot, as fast
    /// as the concurrency allows; returns how long it took.
    pub async fn grow_to(&mut self, n: usize) -> Duration {
        if self.slots.len() < n {
            self.slots.resize_with(n, || None);
        }
        self.fill(0..self.slots.len()).await
    }

    /// Like [`grow_to`](Self::grow_to), but the joins start evenly spread
    /// over `spread`, as independent processes would start: their renewals
    /// then stay spread too, instead of coming in one burst each period.
    pub async fn grow_spread(&mut self, n: usize, spread: Duration) -> Duration {
        if self.slots.len() < n {
            self.slots.resize_with(n, || None);
        }
        let started = Instant::now();
        let empty: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].is_none() && !self.pending_slots.contains(&i))
            .collect();
        let step = spread / u32::try_from(empty.len().max(1)).unwrap_or(u32::MAX);
        let mut at = started;
        for i in empty {
            self.spawn_join_at(i, at);
            at += step;
        }
        self.settle().await;
        started.elapsed()
    }

    /// Joins a worker in every empty slot of `range`; returns how long it took.
    async fn fill(&mut self, range: std::ops::Range<usize>) -> Duration {
        let started = Instant::now();
        let empty: Vec<usize> = range
            .filter(|&i| self.slots[i].is_none() && !self.pending_slots.contains(&i))
            .collect();
        let (options, joins) = (&self.options, &self.joins);
        let this = &*self;
        let joined: Vec<Joining> = stream::iter(empty)
            .map(|i| {
                let allocator = this.allocator(i).clone();
                async move { (i, timed_join(allocator, options.clone(), joins).await) }
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        for (i, worker) in joined {
            self.place(i, worker);
        }
        started.elapsed()
    }

    /// Puts a joined worker in its slot, or counts the failure.
    fn place(&mut self, i: usize, worker: Result<Worker, JoinError>) {
        match worker {
            Ok(worker) => {
                self.joined += 1;
                self.slots[i] = Some(worker);
            }
            Err(e) => {
                self.join_failures += 1;
                if self.join_errors.len() < KEEP_REASONS {
                    self.join_errors.push(e.to_string());
                }
            }
        }
    }

    /// Starts a join for slot `i` in the background.
    fn spawn_join(&mut self, i: usize) {
        self.spawn_join_at(i, Instant::now());
    }

    /// Starts a join for slot `i` in the background at `at`.
    fn spawn_join_at(&mut self, i: usize, at: Instant) {
        let allocator = self.allocator(i).clone();
        let (options, joins, permits) = (
            self.options.clone(),
            self.joins.clone(),
            self.permits.clone(),
        );
        self.pending_slots.insert(i);
        self.pending.spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let _permit = permits.acquire_owned().await;
            (i, timed_join(allocator, options, &joins).await)
        });
    }

    /// Puts every background join that has finished in its slot.
    pub fn collect_joined(&mut self) {
        while let Some(done) = self.pending.try_join_next() {
            self.finish(done);
        }
    }

    /// Waits for every background join.
    pub async fn settle(&mut self) {
        while let Some(done) = self.pending.join_next().await {
            self.finish(done);
        }
    }

    fn finish(&mut self, done: Result<Joining, tokio::task::JoinError>) {
        match done {
            Ok((i, worker)) => {
                self.pending_slots.remove(&i);
                self.place(i, worker);
            }
            Err(e) => {
                // A join task that panicked: its slot stays empty.
                self.join_failures += 1;
                if self.join_errors.len() < KEEP_REASONS {
                    self.join_errors.push(e.to_string());
                }
            }
        }
    }

    /// Counts the workers that are `Lost` now and empties their slots (a
    /// later fill joins new ones there). Returns how many it found.
    pub fn scan_lapses(&mut self) -> u64 {
        let mut found = 0;
        for slot in &mut self.slots {
            if let Some(WorkerState::Lost { reason }) = slot.as_ref().map(Worker::state) {
                found += 1;
                if self.lapse_reasons.len() < KEEP_REASONS {
                    self.lapse_reasons.push(reason);
                }
                *slot = None;
            }
        }
        self.lapses += found;
        found
    }

    /// One churn cycle: stops the live workers of `range` (each releases its
    /// worker ID) and starts joins in their slots, which finish in the
    /// background (a join that gets a just-released ID waits until the
    /// clock passes the window its previous holder reserved).
    pub async fn churn(&mut self, range: std::ops::Range<usize>) -> Cycle {
        self.collect_joined();
        let range = range.start.min(self.slots.len())..range.end.min(self.slots.len());
        let started = Instant::now();
        let leaving: Vec<Worker> = self.slots[range.clone()]
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        let stopped = leaving.len();
        self.stop(leaving).await;
        let stop_time = started.elapsed();
        let empty: Vec<usize> = range
            .filter(|&i| self.slots[i].is_none() && !self.pending_slots.contains(&i))
            .collect();
        for &i in &empty {
            self.spawn_join(i);
        }
        Cycle {
            stopped,
            joining: empty.len(),
            stop_time,
        }
    }

    /// Stops every worker (after the background joins).
    pub async fn stop_all(&mut self) {
        self.settle().await;
        let all: Vec<Worker> = self.slots.iter_mut().filter_map(Option::take).collect();
        self.stop(all).await;
        self.slots.clear();
    }

    /// Stops `workers`, several at a time; a worker already `Lost` is a lapse.
    async fn stop(&mut self, workers: Vec<Worker>) {
        let ends: Vec<WorkerState> = stream::iter(workers)
            .map(|w| async move { w.stop().await })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        for end in ends {
            if let WorkerState::Lost { reason } = end {
                self.lapses += 1;
                if self.lapse_reasons.len() < KEEP_REASONS {
                    self.lapse_reasons.push(reason);
                }
            }
        }
    }
}

/// Joins (see [`join_retrying`]) and records how long it took.
async fn timed_join(
    allocator: Allocator,
    options: WorkerOptions,
    joins: &Histogram,
) -> Result<Worker, JoinError> {
    let started = Instant::now();
    let worker = join_retrying(allocator, options).await;
    joins.record(started.elapsed());
    worker
}

/// Joins, retrying a store that could not answer (a few times, briefly).
async fn join_retrying(allocator: Allocator, options: WorkerOptions) -> Result<Worker, JoinError> {
    let mut attempt = 0;
    loop {
        match Worker::join(allocator.clone(), options.clone()).await {
            Err(e) if e.is_retryable() && attempt < 4 => {
                attempt += 1;
                tracing::debug!(attempt, "join failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            answer => return answer,
        }
    }
}
