//! A snowflake worker: a leased worker ID, kept alive in the background, and
//! a generator that issues IDs only while that lease is surely held.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::{Clock, DriftPolicy, Generator, Layout, LocalGenerator, SystemClock};
use workerid_core::{Allocator, Lease};

use crate::meters::WorkerMeters;
use crate::reservation::{default_window, Reservation};
use crate::{Error, NextIdError, Result};

mod keeper;
use keeper::{reserve, Keeper};

/// Releases the lease of a join whose future was dropped (a caller that
/// gave up waiting, a shutdown) before the worker took the lease over: the
/// worker ID is free at once instead of after its ttl.
struct AbandonedJoin {
    /// `None` once the join finished, either way.
    allocator: Option<Allocator>,
    lease: Lease,
}

impl Drop for AbandonedJoin {
    fn drop(&mut self) {
        let Some(allocator) = self.allocator.take() else {
            return;
        };
        let lease = self.lease.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = release_unused(&allocator, &lease).await {
                        tracing::warn!(
                            "could not release worker ID {} of an abandoned join: {e}",
                            lease.id()
                        );
                        allocator.keep_for_next_acquire(&lease);
                    }
                });
            }
            Err(_) => tracing::warn!(
                "worker ID {} of an abandoned join is left to expire (no runtime to release it)",
                lease.id()
            ),
        }
    }
}

/// Where a [`Worker`] is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerState {
    /// Acquiring a worker ID, waiting for the clock to pass the previous
    /// holder's watermark, reserving the first time window.
    Starting,
    /// Issuing IDs.
    Ready {
        /// The leased worker ID.
        worker_id: u32,
        /// The lease's fencing token.
        fence: u64,
    },
    /// The lease is gone (taken over, expired, or past its deadline during a
    /// store outage): no more IDs.
    Lost {
        /// What happened.
        reason: String,
    },
    /// Stopped and released (by [`Worker::stop`], on drop, or because the
    /// clock drifted beyond recovery), or stopped on a lease that was no
    /// longer its own: nothing is held.
    Stopped,
    /// Stopped, but the store did not answer the release: the worker ID is
    /// held until its ttl runs out (or the release was made and its answer
    /// lost). No more IDs either way.
    StoppedUnreleased {
        /// The store's error.
        reason: String,
    },
}

impl WorkerState {
    /// Whether the worker has ended: lost, stopped, released or not. No
    /// state follows.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            WorkerState::Lost { .. } | WorkerState::Stopped | WorkerState::StoppedUnreleased { .. }
        )
    }
}

/// How a [`Worker`] runs. Every setting has a default.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    layout: Layout,
    drift: DriftPolicy,
    clock: Arc<dyn Clock>,
    renew_every: Option<Duration>,
    window: Option<Duration>,
    retry_every: Duration,
    max_start_wait: Option<Duration>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            layout: Layout::classic(),
            drift: DriftPolicy::default(),
            clock: Arc::new(SystemClock::new()),
            renew_every: None,
            window: None,
            retry_every: Duration::from_millis(200),
            max_start_wait: None,
        }
    }
}

impl WorkerOptions {
    /// The defaults: classic layout, system clock, renew every ttl/3.
    pub fn new() -> Self {
        Self::default()
    }
    /// The ID layout (default [`Layout::classic`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }
    /// The clock-drift policy.
    pub fn drift(mut self, drift: DriftPolicy) -> Self {
        self.drift = drift;
        self
    }
    /// The clock (default [`SystemClock`]; tests use a fake one).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// How often to renew (default ttl/3).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }
    /// How far ahead of its clock a reservation reaches (at least two
    /// renewal periods). A renewal raises the stored watermark to
    /// `now + window` only when less than one and a half renewal periods of
    /// the reserved window are left; the others only extend the lease. The
    /// next holder of the worker ID starts above the reserved window.
    ///
    /// Default: four renewal periods (one renewal in three writes the
    /// watermark), or two ttls in whole periods on a store that holds an
    /// expired ID back one more ttl
    /// ([`Capabilities::quarantine`](workerid_core::Capabilities), etcd):
    /// the next holder of an expired ID cannot get it sooner, and one renewal
    /// in five writes. The next holder of a force-released ID may wait for
    /// the whole window.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = Some(window);
        self
    }
    /// How soon to retry a renewal the store could not answer (default 200 ms).
    pub fn retry_every(mut self, every: Duration) -> Self {
        self.retry_every = every;
        self
    }
    /// The longest a starting worker waits for its clock to pass the previous
    /// holder's watermark before it gives up (default: the window plus the
    /// drift policy's `give_up_at`).
    pub fn max_start_wait(mut self, wait: Duration) -> Self {
        self.max_start_wait = Some(wait);
        self
    }
}

/// A snowflake worker on a leased worker ID, over any [`LeaseStore`](workerid_core::LeaseStore)
/// (libx.net/workerid's `Worker`, which needed etcd).
///
/// - [`join`](Worker::join) acquires a worker ID, waits until the clock has
///   passed the previous holder's watermark, reserves a first time window in
///   the store, and returns a ready worker.
/// - A background task renews the lease every ttl/3, raising the watermark
///   to `now + window` when less than one and a half renewal periods of the
///   reserved window are left; it retries a store that cannot answer,
///   and gives up (state [`WorkerState::Lost`]) when the lease is lost or its
///   deadline passes.
/// - [`next_id`](Worker::next_id) fails closed: no ID once the local deadline
///   (send instant of the last successful renewal + ttl - margin) has passed,
///   or beyond the reserved window, checked on every call. On a
///   [`TickingClock`](crate::TickingClock) the deadline is checked against
///   its ticker's time, which a descheduled ticker leaves behind: an ID may
///   then be issued after the deadline, never with a timestamp past the
///   reserved window (fail closed by timestamp, see the crate's docs).
/// - [`stop`](Worker::stop) releases the worker ID, leaving the last
///   timestamp issued as its watermark (not the reserved window), so the
///   next holder can start at once; dropping the worker does the same in
///   the background.
///
/// ```
/// use workerid_snowflake::{Worker, WorkerOptions};
/// use workerid_core::{Allocator, LeaseOptions, LeaseStore};
///
/// async fn demo(store: impl LeaseStore) -> workerid_snowflake::Result<()> {
///     let allocator = Allocator::new(store, "orders", LeaseOptions::new())?;
///     let worker = Worker::join(allocator, WorkerOptions::new()).await?;
///     let id = worker.next_id()?;
///     worker.stop().await;
///     Ok(())
/// }
/// ```
#[derive(Debug)]
pub struct Worker {
    generator: Arc<Generator>,
    fence: u64,
    state: watch::Receiver<WorkerState>,
    stop: Arc<Notify>,
}

impl Worker {
    /// Joins: leases a worker ID from `allocator` and starts keeping it.
    ///
    /// # Errors
    /// [`Error::Lease`] with the allocator's errors (`NoAvailableId`, `Unavailable`, ...);
    /// [`Error::InvalidConfig`] when the pool's IDs do not fit the layout,
    /// the periods do not fit the ttl, or the window is longer than the
    /// layout's timestamp field covers; [`Error::ClockDriftTooLarge`] when the
    /// clock is further behind the previous holder's watermark than
    /// `max_start_wait` on every worker ID it was offered (an ID that far
    /// ahead is passed over for another, up to eight of them, and every one
    /// is released with its watermark kept).
    pub async fn join(allocator: Allocator, options: WorkerOptions) -> Result<Worker> {
        Worker::join_until(allocator, options, std::future::pending()).await
    }

    /// Joins as [`Worker::join`] does, unless `until` resolves first (a
    /// shutdown): then the worker ID, if one was leased, is released before
    /// this returns, and the answer is [`Error::NotReady`]. A caller that
    /// must stop while the worker waits for the previous holder's window
    /// uses this rather than dropping the join.
    ///
    /// # Errors
    /// As [`Worker::join`]; [`Error::NotReady`] when `until` came first.
    pub async fn join_until(
        allocator: Allocator,
        options: WorkerOptions,
        until: impl std::future::Future<Output = ()>,
    ) -> Result<Worker> {
        let ttl = allocator.options().default_ttl();
        let renew_every = options.renew_every.unwrap_or(ttl / 3);
        let quarantine = allocator.store().capabilities().quarantine;
        let window = options
            .window
            .unwrap_or_else(|| default_window(renew_every, ttl, quarantine));
        let layout = options.layout;
        if allocator.max_worker_id() > layout.max_worker_id() {
            return Err(Error::invalid_config(format!(
                "the pool's worker IDs go up to {}, the layout's {} worker bits hold {}",
                allocator.max_worker_id(),
                layout.worker_bits(),
                layout.max_worker_id()
            )));
        }
        if renew_every.is_zero() || renew_every >= ttl || window < renew_every.saturating_mul(2) {
            return Err(Error::invalid_config(format!(
                "renew every {renew_every:?} with a window of {window:?} does not fit a ttl of {ttl:?} \
                 (0 < renew_every < ttl, window >= 2 * renew_every)"
            )));
        }
        // A watermark past the layout's last timestamp would keep the next
        // holder of the worker ID from ever starting.
        if window > layout.span() {
            return Err(Error::invalid_config(format!(
                "a window of {window:?} is longer than the layout's timestamp field covers ({:?})",
                layout.span()
            )));
        }
        let mut reservation = Reservation::new(window, renew_every);
        let max_start_wait = options
            .max_start_wait
            .unwrap_or_else(|| window.saturating_add(options.drift.give_up_at));
        let clock = options.clock;
        let (state, state_rx) = watch::channel(WorkerState::Starting);
        let mut lease = acquire_usable(&allocator, &clock, max_start_wait).await?;
        let mut abandoned = AbandonedJoin {
            allocator: Some(allocator.clone()),
            lease: lease.clone(),
        };
        let stop = Arc::new(Notify::new());
        let joined = async {
            wait_past(&allocator, &mut lease, &clock, renew_every, max_start_wait).await?;
            let generator =
                Generator::with_policy(layout, lease.id().get(), clock.clone(), options.drift)?
                    .closed(stop.clone());
            if let Some(floor) =
                layout.timestamp_at(Duration::from_millis(lease.previous_watermark()))
            {
                generator.set_last_used_timestamp(floor);
            }
            let generator = Arc::new(generator);
            let deadline =
                reserve(&allocator, &mut lease, &generator, &clock, &mut reservation).await?;
            Ok::<_, Error>((generator, deadline))
        };
        tokio::pin!(until);
        let joined = tokio::select! {
            joined = joined => joined,
            () = &mut until => Err(Error::NotReady {
                reason: "stopped before the worker joined".into(),
            }),
        };
        abandoned.allocator = None;
        let (generator, deadline) = match joined {
            Ok(joined) => joined,
            Err(e) => {
                if let Err(release) = release_unused(&allocator, &lease).await {
                    tracing::warn!(
                        "could not release worker ID {} after a failed join: {release}",
                        lease.id()
                    );
                    // The next join's acquire takes it again while it is live.
                    allocator.keep_for_next_acquire(&lease);
                }
                return Err(e);
            }
        };
        let fence = lease.fence();
        let _ = state.send(WorkerState::Ready {
            worker_id: lease.id().get(),
            fence,
        });
        tracing::info!(
            worker_id = lease.id().get(),
            fence = lease.fence(),
            "snowflake worker ready"
        );
        let meters = WorkerMeters::new(allocator.namespace(), lease.ttl());
        let now = clock.now();
        meters.renewal(deadline, now.mono, now.wall, &layout);
        let keeper = Keeper {
            meters,
            allocator,
            lease,
            generator: generator.clone(),
            clock,
            renew_every,
            reservation,
            retry_every: options.retry_every,
            stop: stop.clone(),
            state,
            deadline,
        };
        // The keeper ends by itself once stopped (by stop, drop, or a drift
        // beyond recovery) or once the lease is lost.
        tokio::spawn(keeper.run());
        Ok(Worker {
            generator,
            fence,
            state: state_rx,
            stop,
        })
    }

    /// The next snowflake ID. Blocks the calling thread as
    /// [`Generator::next_id`] does: up to `block_below` for a clock that
    /// stepped back a little, up to a time unit when the unit's sequence is
    /// used up.
    ///
    /// # Errors
    /// [`NextIdError::NotReady`] unless the lease is surely live (on a
    /// [`TickingClock`](crate::TickingClock): by its ticker's time) and the
    /// reserved window not exhausted; the drift errors of
    /// [`Generator::next_id`].
    #[inline]
    pub fn next_id(&self) -> Result<u64, NextIdError> {
        self.generator.next_id()
    }

    /// A per-thread handle that claims `batch` sequence numbers at a time
    /// and still checks the lease on every ID (see [`LocalGenerator`]).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a batch of 0.
    pub fn local(&self, batch: u32) -> Result<LocalGenerator> {
        self.generator.local(batch)
    }

    /// The generator (its layout, last used timestamp, ...).
    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    /// The leased worker ID.
    pub fn worker_id(&self) -> u32 {
        self.generator.worker_id()
    }

    /// The fence of the grant this worker joined with (also in
    /// [`WorkerState::Ready`], but readable whatever the state is now).
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The current state.
    pub fn state(&self) -> WorkerState {
        self.state.borrow().clone()
    }

    /// A receiver of every state change.
    pub fn watch(&self) -> watch::Receiver<WorkerState> {
        self.state.clone()
    }

    /// Resolves once the worker has stopped or lost its lease (libx.net/workerid's
    /// `StopChannel`). Both are final; [`SupervisedWorker`](crate::SupervisedWorker)
    /// joins again.
    pub async fn stopped(&self) -> WorkerState {
        let mut state = self.state.clone();
        let done = state
            .wait_for(WorkerState::is_final)
            .await
            .map(|s| s.clone());
        done.unwrap_or(WorkerState::Stopped)
    }

    /// Stops issuing IDs, releases the worker ID (storing the last timestamp
    /// used as its watermark) and waits until that is done (libx.net/workerid's `Stop`):
    /// [`WorkerState::Stopped`] once released,
    /// [`WorkerState::StoppedUnreleased`] when the store did not take the
    /// release, or the earlier final state ([`WorkerState::Lost`]). A renewal
    /// in flight is waited for first: up to two of the allocator's request
    /// timeouts in all; bound it with `tokio::time::timeout` where that
    /// matters.
    pub async fn stop(&self) -> WorkerState {
        self.stop.notify_one();
        self.stopped().await
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // The keeper releases the worker ID and ends; if the runtime is gone,
        // the task is gone with it.
        self.generator.close();
        self.stop.notify_one();
    }
}

/// How many worker IDs a join passes over, at most, because their
/// watermark is further ahead of its clock than it may wait.
const MAX_PASSED_OVER: usize = 8;

/// How far `lease`'s previous watermark is ahead of `clock`'s wall time, as
/// the wait to be past it; zero once the clock is past it.
fn lead(lease: &Lease, clock: &Arc<dyn Clock>) -> Duration {
    let watermark = Duration::from_millis(lease.previous_watermark());
    let wall = clock.now().wall;
    if wall > watermark {
        Duration::ZERO
    } else {
        watermark - wall + Duration::from_millis(1)
    }
}

/// Acquires a worker ID whose previous watermark this clock can wait out
/// within `max_wait`. An ID whose watermark is further ahead (left by a
/// holder whose clock ran far ahead, or written in another unit by a
/// client of the lease API) is held while another is acquired, up to
/// [`MAX_PASSED_OVER`] of them, and then released with its watermark kept:
/// one such ID costs the pool that ID, not every join that is offered it.
async fn acquire_usable(
    allocator: &Allocator,
    clock: &Arc<dyn Clock>,
    max_wait: Duration,
) -> Result<Lease> {
    let mut passed_over: Vec<(Lease, Duration)> = Vec::new();
    let acquired = loop {
        match allocator.acquire().await {
            Ok(lease) => {
                let ahead = lead(&lease, clock);
                if ahead <= max_wait || passed_over.len() == MAX_PASSED_OVER {
                    // The last one is refused by the wait that follows.
                    break Ok(lease);
                }
                tracing::warn!(
                    worker_id = lease.id().get(),
                    "passing over worker ID {}: its watermark is {ahead:?} ahead of this \
                     clock, more than the {max_wait:?} a join waits",
                    lease.id()
                );
                passed_over.push((lease, ahead));
            }
            Err(e) => break Err(e),
        }
    };
    for (lease, _) in &passed_over {
        if let Err(e) = release_unused(allocator, lease).await {
            tracing::warn!(
                "could not release passed-over worker ID {}: {e}",
                lease.id()
            );
        }
    }
    match (acquired, passed_over.first()) {
        (Ok(lease), _) => Ok(lease),
        // Every ID offered was too far ahead: that, not the full pool, is
        // what the caller can act on.
        (Err(workerid_core::Error::NoAvailableId { .. }), Some((_, ahead))) => {
            Err(Error::ClockDriftTooLarge { drift: *ahead })
        }
        (Err(e), _) => Err(e.into()),
    }
}

/// Waits until the clock's wall time is past the previous holder's
/// watermark, renewing the lease at least every `renew_every` meanwhile (the
/// wait can be longer than the ttl).
async fn wait_past(
    allocator: &Allocator,
    lease: &mut Lease,
    clock: &Arc<dyn Clock>,
    renew_every: Duration,
    max_wait: Duration,
) -> Result<()> {
    loop {
        let behind = lead(lease, clock);
        if behind.is_zero() {
            return Ok(());
        }
        if behind > max_wait {
            return Err(Error::ClockDriftTooLarge { drift: behind });
        }
        tracing::info!("waiting {behind:?} for the clock to pass the previous holder's watermark");
        let chunk = behind.min(renew_every);
        if clock.real_time() {
            // A timer, not a blocked thread: thousands of joins may wait at
            // once, and the runtime has a few hundred blocking threads.
            tokio::time::sleep(chunk).await;
        } else {
            let clock = clock.clone();
            tokio::task::spawn_blocking(move || clock.sleep(chunk))
                .await
                .map_err(|e| Error::NotReady {
                    reason: format!("the wait for the clock failed: {e}"),
                })?;
        }
        allocator.renew(lease).await?;
    }
}

/// Releases the lease of a join that issued no ID, leaving the earlier
/// holders' watermark rather than a window its reservation may have stored
/// (a reservation that failed may still have been written), so the next
/// holder does not wait for time nobody used.
async fn release_unused(allocator: &Allocator, lease: &Lease) -> workerid_core::Result<()> {
    // The allocator never stores less than `previous_watermark`; 0 would
    // mean "leave the stored one".
    allocator
        .release_with_watermark(lease, lease.previous_watermark().max(1))
        .await
}
