//! A worker kept joined: a task that joins, watches the worker, and joins
//! again (with backoff and jitter) after a failed start or a lost lease,
//! until it is stopped and releases the lease.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::sync::watch;
use workerid_core::Allocator;

use crate::{Error, NextIdError, Worker, WorkerOptions, WorkerState};

/// The first wait after a failed join; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);

/// The longest wait between joins: short enough that a store answering again
/// gets a worker back well within a ttl.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Why there is no worker, by the last join's outcome, in fixed words: the
/// store's own message, which may name its addresses, goes to the log only.
const JOINING: [&str; 7] = [
    "no worker holds a lease (joining)",
    "no worker holds a lease: every worker ID of the pool is held (joining)",
    "no worker holds a lease: the store is unavailable (joining)",
    "no worker holds a lease: this clock is too far behind the watermarks of the worker IDs \
     offered (joining)",
    "no worker holds a lease: the last join failed, the log says why (joining)",
    "no worker holds a lease: the settings contradict the layout or the namespace's pool, \
     the log says why (not joining again)",
    "no worker holds a lease: stopped",
];
const JOINED: u8 = 0;
const POOL_HELD: u8 = 1;
const STORE_UNAVAILABLE: u8 = 2;
const CLOCK_BEHIND: u8 = 3;
const JOIN_FAILED: u8 = 4;
const GAVE_UP: u8 = 5;
const STOPPED: u8 = 6;

/// A [`Worker`] kept joined: what a service that must go on issuing IDs
/// through store outages and lost leases holds, rather than a `Worker`,
/// whose [`Lost`](WorkerState::Lost) and [`Stopped`](WorkerState::Stopped)
/// states are final.
///
/// # Behavior
/// - [`spawn`](SupervisedWorker::spawn) starts a task that joins with
///   [`Worker::join_until`]; a join that fails is tried again after a wait
///   that doubles from 100 ms to 1 s, jittered over its upper half so that
///   processes that lost the store together do not all come back at once.
/// - Once a worker has joined, [`next_id`](SupervisedWorker::next_id) is
///   that worker's: one atomic load and the worker's own fast path, no lock.
///   When it is lost (taken over, or its deadline passed during a store
///   outage) the task drops it and joins again. The new worker (maybe with
///   another worker ID) issues IDs above the old one's, even with the wall
///   clock stepped back: it starts above the store's watermark of its
///   worker ID and above the last timestamp the workers before it issued.
/// - Between workers, `next_id` answers [`NextIdError::NotReady`] with a
///   reason in fixed words (joining; every worker ID held; the store
///   unavailable; the clock too far behind the IDs offered; another
///   failure, which the log names), never a store's message.
/// - A join refused for its settings ([`Error::InvalidConfig`]: a pool
///   wider than the layout's worker bits, say; or the namespace's pool
///   recorded as another size, `ConfigMismatch`) is not tried again, as no
///   retry can mend it: the task ends, logs the error, and
///   [`is_ended`](SupervisedWorker::is_ended) turns true;
///   [`last_join_error`](SupervisedWorker::last_join_error) has it.
/// - [`stop`](SupervisedWorker::stop) ends the task: a join in progress is
///   abandoned and its worker ID released, the current worker is stopped
///   and releases its worker ID. Dropping it does the same in the
///   background while the runtime runs (not once the runtime shuts down:
///   call `stop` before, or the worker ID stays held until its ttl ends).
///   `next_id` then answers `NotReady` ("stopped") for good.
///
/// ```
/// use std::time::Duration;
/// use workerid_snowflake::{SupervisedWorker, WorkerOptions};
/// use workerid_core::{Allocator, LeaseOptions, LeaseStore};
///
/// async fn demo(store: impl LeaseStore) -> workerid_snowflake::Result<()> {
///     let allocator = Allocator::new(store, "orders", LeaseOptions::new())?;
///     let ids = SupervisedWorker::spawn(allocator, WorkerOptions::new());
///     ids.wait_first_join(Duration::from_secs(10)).await;
///     let id = ids.next_id()?; // NotReady while no worker holds a lease
///     ids.stop(Duration::from_secs(5)).await;
///     Ok(())
/// }
/// ```
#[derive(Debug)]
pub struct SupervisedWorker {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    done: watch::Receiver<bool>,
}

/// What the supervising task and its handle share.
#[derive(Debug)]
struct Shared {
    current: ArcSwapOption<Worker>,
    /// Turns true once the first join has succeeded or failed.
    tried: watch::Sender<bool>,
    joins: AtomicU64,
    losses: AtomicU64,
    join_failures: AtomicU64,
    /// How the last join ended: [`JOINED`] (or none yet), [`POOL_HELD`],
    /// [`STORE_UNAVAILABLE`], an index of [`JOINING`].
    last_join: AtomicU8,
    /// False once a stopped worker's release was not taken by the store.
    released: AtomicBool,
    /// The last failed join's error, for [`SupervisedWorker::last_join_error`].
    last_error: std::sync::Mutex<Option<String>>,
    /// True once no worker will join any more: stopped, or given up.
    ended: AtomicBool,
}

/// What a [`SupervisedWorker`] has done since it was spawned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SupervisorCounts {
    /// Workers that joined, the first one included.
    pub joins: u64,
    /// Workers that ended without being stopped (their lease was lost).
    pub losses: u64,
    /// Joins that failed (and were tried again).
    pub join_failures: u64,
}

impl SupervisedWorker {
    /// Starts keeping a worker of `allocator` joined with `options`, in a
    /// task of the current Tokio runtime.
    ///
    /// # Panics
    /// Outside a Tokio runtime, as [`tokio::spawn`] does.
    pub fn spawn(allocator: Allocator, options: WorkerOptions) -> SupervisedWorker {
        let shared = Arc::new(Shared::new());
        let (stop, stop_rx) = watch::channel(false);
        let (done_tx, done) = watch::channel(false);
        let task = shared.clone();
        tokio::spawn(async move {
            task.keep(allocator, options, stop_rx).await;
            done_tx.send_replace(true);
        });
        SupervisedWorker { shared, stop, done }
    }

    /// The next ID of the current worker.
    ///
    /// # Errors
    /// [`NextIdError::NotReady`] while no worker holds a live lease (between
    /// a loss and the next join, or after [`stop`](Self::stop)); the
    /// worker's own errors ([`Worker::next_id`]).
    #[inline]
    pub fn next_id(&self) -> Result<u64, NextIdError> {
        match &*self.shared.current.load() {
            Some(worker) => worker.next_id(),
            None => Err(NextIdError::NotReady {
                reason: self.shared.joining(),
            }),
        }
    }

    /// The current worker, if one has joined and has not ended yet: for its
    /// generator, layout or [`local`](Worker::local) handles. A handle taken
    /// from it stops issuing IDs when that worker ends; take a new one from
    /// the next worker.
    pub fn worker(&self) -> Option<Arc<Worker>> {
        self.shared.current.load_full()
    }

    /// The worker ID of the current worker while it can issue IDs, or why
    /// it cannot: no worker (joining, in the fixed words of
    /// [`next_id`](Self::next_id)), the lease lost, its deadline passed
    /// before a renewal succeeded, the reserved window run out, the clock
    /// behind. Asked of the worker's generator
    /// ([`Generator::readiness`](crate::Generator::readiness)) without
    /// taking an ID: a worker fails closed at its lease deadline, before it
    /// reports the loss.
    ///
    /// # Errors
    /// The [`NextIdError`] a call of [`next_id`](Self::next_id) would
    /// answer now.
    pub fn status(&self) -> Result<u32, NextIdError> {
        let current = self.shared.current.load();
        let Some(worker) = current.as_ref() else {
            return Err(NextIdError::NotReady {
                reason: self.shared.joining(),
            });
        };
        if !matches!(worker.state(), WorkerState::Ready { .. }) {
            return Err(NextIdError::NotReady {
                reason: "the lease was lost (joining again)",
            });
        }
        worker.generator().readiness().map(|()| worker.worker_id())
    }

    /// Waits until the first join has succeeded or failed, for up to
    /// `limit`, and says whether a worker is current then: a service that
    /// starts serving once it returns answers its first request with an ID.
    pub async fn wait_first_join(&self, limit: Duration) -> bool {
        let mut tried = self.shared.tried.subscribe();
        let _ = tokio::time::timeout(limit, tried.wait_for(|&tried| tried)).await;
        self.shared.current.load().is_some()
    }

    /// Whether no worker will join any more: after [`stop`](Self::stop),
    /// or once a join was refused for its settings (see the type's
    /// Behavior). A retry loop on [`next_id`](Self::next_id), whose
    /// `NotReady` is retryable while a next worker may come, ends on it.
    pub fn is_ended(&self) -> bool {
        self.shared.ended.load(Ordering::Acquire)
    }

    /// The error of the last join that failed, as text (the log has it
    /// too), or `None` when none failed since the last join succeeded: for
    /// a health page, where `next_id`'s fixed words say only the kind.
    pub fn last_join_error(&self) -> Option<String> {
        self.shared
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The joins, losses and failed joins so far.
    pub fn counts(&self) -> SupervisorCounts {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        SupervisorCounts {
            joins: get(&self.shared.joins),
            losses: get(&self.shared.losses),
            join_failures: get(&self.shared.join_failures),
        }
    }

    /// Stops keeping a worker: no ID is issued from here on, the current
    /// worker (or a join in progress) stops and releases its worker ID.
    /// Waits for that for up to `timeout` and says whether it ended within
    /// it with nothing left held: false past the timeout (the release goes
    /// on in the background) or when the store did not take the release (a
    /// warning is logged); a worker ID left so expires with its ttl.
    /// Calling it again waits again.
    pub async fn stop(&self, timeout: Duration) -> bool {
        self.shared.end(STOPPED);
        self.stop.send_replace(true);
        let mut done = self.done.clone();
        let ended = tokio::time::timeout(timeout, done.wait_for(|&done| done)).await;
        ended.is_ok() && self.shared.released.load(Ordering::Acquire)
    }
}

impl Drop for SupervisedWorker {
    fn drop(&mut self) {
        self.shared.end(STOPPED);
        self.stop.send_replace(true);
    }
}

impl Shared {
    /// No worker yet, nothing tried.
    fn new() -> Shared {
        Shared {
            current: ArcSwapOption::empty(),
            tried: watch::Sender::new(false),
            joins: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            join_failures: AtomicU64::new(0),
            last_join: AtomicU8::new(JOINED),
            released: AtomicBool::new(true),
            last_error: std::sync::Mutex::new(None),
            ended: AtomicBool::new(false),
        }
    }

    /// No worker will join any more, for the reason `why` (an index of
    /// [`JOINING`]); the first reason stays.
    fn end(&self, why: u8) {
        if !self.ended.swap(true, Ordering::AcqRel) {
            self.last_join.store(why, Ordering::Relaxed);
        }
    }

    /// Joins, and joins again after a loss, until `stop` turns true.
    async fn keep(
        &self,
        allocator: Allocator,
        options: WorkerOptions,
        stop: watch::Receiver<bool>,
    ) {
        let mut backoff = MIN_BACKOFF;
        // The last timestamp the workers before issued: a next worker, with
        // another worker ID whose watermark is older, starts above it.
        let mut floor = 0;
        loop {
            // A stop while joining releases the worker ID before the join
            // returns (a dropped join would leave it to expire).
            let mut until = stop.clone();
            let joined =
                Worker::join_until(allocator.clone(), options.clone(), stopping(&mut until)).await;
            if *stop.borrow() {
                if let Ok(worker) = joined {
                    self.stopped(&worker).await;
                }
                return;
            }
            let worker = match joined {
                Ok(worker) => Arc::new(worker),
                Err(e) => {
                    self.joined(Err(&e));
                    self.join_failures.fetch_add(1, Ordering::Relaxed);
                    if is_final(&e) {
                        self.end(GAVE_UP);
                        self.tried.send_replace(true);
                        tracing::error!(
                            "the snowflake worker cannot join with these settings, and stops \
                             trying: {e}"
                        );
                        return;
                    }
                    self.tried.send_replace(true);
                    let wait = jittered(backoff);
                    tracing::warn!(
                        "the snowflake worker could not join, retrying in {wait:?}: {e}"
                    );
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    let mut until = stop.clone();
                    tokio::select! {
                        () = tokio::time::sleep(wait) => continue,
                        () = stopping(&mut until) => return,
                    }
                }
            };
            backoff = MIN_BACKOFF;
            worker.generator().set_last_used_timestamp(floor);
            self.joined(Ok(()));
            self.joins.fetch_add(1, Ordering::Relaxed);
            self.current.store(Some(worker.clone()));
            self.tried.send_replace(true);
            let mut until = stop.clone();
            tokio::select! {
                state = worker.stopped() => {
                    self.current.store(None);
                    floor = floor.max(worker.generator().last_used_timestamp());
                    self.losses.fetch_add(1, Ordering::Relaxed);
                    tracing::error!("the snowflake worker ended ({state:?}): joining again");
                }
                () = stopping(&mut until) => {
                    self.current.store(None);
                    self.stopped(&worker).await;
                    return;
                }
            }
        }
    }

    /// Stops `worker` and records whether the store took its release.
    async fn stopped(&self, worker: &Worker) {
        let released = !matches!(worker.stop().await, WorkerState::StoppedUnreleased { .. });
        self.released.store(released, Ordering::Release);
    }

    /// Why no worker holds a lease, by the last join's outcome.
    fn joining(&self) -> &'static str {
        let last = usize::from(self.last_join.load(Ordering::Relaxed));
        JOINING.get(last).copied().unwrap_or(JOINING[0])
    }

    /// Records how a join ended (unless no worker will join any more).
    fn joined(&self, outcome: Result<(), &Error>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            outcome.err().map(ToString::to_string);
        if self.ended.load(Ordering::Acquire) {
            return;
        }
        let last = match outcome {
            Ok(()) => JOINED,
            Err(Error::Lease(workerid_core::Error::NoAvailableId { .. })) => POOL_HELD,
            Err(Error::Lease(workerid_core::Error::Unavailable { .. })) => STORE_UNAVAILABLE,
            Err(Error::ClockDriftTooLarge { .. }) => CLOCK_BEHIND,
            Err(_) => JOIN_FAILED,
        };
        self.last_join.store(last, Ordering::Relaxed);
    }
}

/// Whether a join that failed with `e` fails the same way whenever it is
/// tried again: its settings contradict the layout or the namespace.
fn is_final(e: &Error) -> bool {
    matches!(
        e,
        Error::InvalidConfig { .. }
            | Error::Lease(
                workerid_core::Error::InvalidConfig { .. }
                    | workerid_core::Error::ConfigMismatch { .. }
            )
    )
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|&stop| stop).await;
}

/// `base` spread over `[base/2, base]`, so that processes that lost the
/// store together do not all come back in the same instant.
fn jittered(base: Duration) -> Duration {
    let half = base / 2;
    let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
    // A hasher keyed at random per process: randomness enough for a spread.
    let random = RandomState::new().hash_one(std::time::Instant::now());
    half + Duration::from_micros(random % spread)
}

#[cfg(test)]
mod tests;
