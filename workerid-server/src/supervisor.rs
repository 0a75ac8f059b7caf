//! The snowflake worker, kept joined: a task that joins, watches the worker,
//! and joins again (with backoff and jitter) after a failed start or a lost
//! lease, until shutdown stops it and releases the lease.
//!
//! Requests read the current worker through an [`ArcSwapOption`]: one atomic
//! load, no lock, so a rejoin never blocks the hot path.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use rand::Rng;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use workerid::snowflake::NextIdError;
use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, Holder, Namespace};

/// The first wait after a failed join; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);

/// The longest wait between joins: short enough that a store answering again
/// gets a worker back well within a ttl.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Why there is no worker, by the last join's outcome: what requests and
/// `/readyz` are told. Fixed words: the store's own message, which may name
/// its addresses, goes to the log only.
const JOINING: [&str; 3] = [
    "no worker holds a lease (joining)",
    "no worker holds a lease: every worker ID of the pool is held (joining)",
    "no worker holds a lease: the store is unavailable (joining)",
];
const JOINED: u8 = 0;
const POOL_HELD: u8 = 1;
const STORE_UNAVAILABLE: u8 = 2;

/// The snowflake side of the server: the current worker, if any.
#[derive(Debug)]
pub struct Snowflake {
    current: ArcSwapOption<Worker>,
    /// Where the worker ID is leased, and the label the lease carries.
    namespace: Namespace,
    holder: Holder,
    /// Turns true once the first join has succeeded or failed.
    tried: watch::Sender<bool>,
    /// Workers that joined (the first one included).
    pub joins: AtomicU64,
    /// Workers that lost their lease.
    pub losses: AtomicU64,
    /// Join attempts that failed.
    pub join_failures: AtomicU64,
    /// How the last join ended: [`JOINED`] (or none yet), [`POOL_HELD`],
    /// [`STORE_UNAVAILABLE`], an index of [`JOINING`].
    last_join: AtomicU8,
}

impl Snowflake {
    /// No worker yet; its leases go to `namespace`, labelled `holder`.
    pub fn new(namespace: Namespace, holder: Holder) -> Self {
        Snowflake {
            current: ArcSwapOption::empty(),
            namespace,
            holder,
            tried: watch::Sender::new(false),
            joins: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            join_failures: AtomicU64::new(0),
            last_join: AtomicU8::new(JOINED),
        }
    }

    /// The namespace the worker ID is leased in.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The holder label every lease of this server carries.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// The worker ID of the current worker while it holds a live lease.
    /// Probed by taking one ID (never served): the generator fails closed
    /// at the lease deadline, before the keeper reports the loss.
    pub fn worker_id(&self) -> Option<u32> {
        self.status().ok()
    }

    /// The worker ID of the current worker while it can issue IDs, or why it
    /// cannot: no worker (joining), the lease lost, its deadline passed
    /// before a renewal succeeded, the reserved window run out. Probed as
    /// [`Snowflake::worker_id`] is.
    pub fn status(&self) -> std::result::Result<u32, String> {
        let current = self.current.load();
        let Some(worker) = current.as_ref() else {
            return Err(self.joining().into());
        };
        if !matches!(worker.state(), WorkerState::Ready { .. }) {
            return Err("the lease was lost".into());
        }
        match worker.next_id() {
            Ok(_) => Ok(worker.worker_id()),
            Err(NextIdError::NotReady { reason }) => Err(reason.to_owned()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Waits until the first join has succeeded or failed, for up to
    /// `limit`: a server that starts listening with a worker already ready
    /// answers its first snowflake request.
    pub async fn first_join(&self, limit: Duration) {
        let mut tried = self.tried.subscribe();
        let _ = tokio::time::timeout(limit, tried.wait_for(|&tried| tried)).await;
    }

    /// The next ID of the current worker.
    ///
    /// # Errors
    /// [`NextIdError::NotReady`] while no worker holds a live lease
    /// (between a loss and the next join); the worker's own errors.
    pub fn next_id(&self) -> std::result::Result<u64, NextIdError> {
        match &*self.current.load() {
            Some(worker) => worker.next_id(),
            None => Err(NextIdError::NotReady {
                reason: self.joining(),
            }),
        }
    }

    /// Why no worker holds a lease, by the last join's outcome.
    fn joining(&self) -> &'static str {
        let last = usize::from(self.last_join.load(Ordering::Relaxed));
        JOINING.get(last).copied().unwrap_or(JOINING[0])
    }

    /// Records how a join ended.
    fn joined(&self, outcome: Result<(), &workerid::snowflake::Error>) {
        use workerid::snowflake::Error;
        let last = match outcome {
            Ok(()) => JOINED,
            Err(Error::Lease(workerid::Error::NoAvailableId { .. })) => POOL_HELD,
            Err(Error::Lease(workerid::Error::Unavailable { .. })) => STORE_UNAVAILABLE,
            Err(_) => JOINED,
        };
        self.last_join.store(last, Ordering::Relaxed);
    }
}

/// Starts the supervisor; it returns once `stop` turns true and the current
/// worker (if any) is stopped and its lease released, or `release_timeout`
/// has passed trying.
pub fn spawn(
    snowflake: Arc<Snowflake>,
    allocator: Allocator,
    options: WorkerOptions,
    mut stop: watch::Receiver<bool>,
    release_timeout: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = MIN_BACKOFF;
        loop {
            // A stop while joining releases the worker ID before the join
            // returns (a dropped join would leave it to expire).
            let mut until = stop.clone();
            let joined =
                Worker::join_until(allocator.clone(), options.clone(), stopping(&mut until)).await;
            if *stop.borrow() {
                if let Ok(worker) = joined {
                    release(&worker, release_timeout).await;
                }
                return;
            }
            let worker = match joined {
                Ok(worker) => Arc::new(worker),
                Err(e) => {
                    snowflake.joined(Err(&e));
                    snowflake.join_failures.fetch_add(1, Ordering::Relaxed);
                    snowflake.tried.send_replace(true);
                    let wait = jittered(backoff);
                    tracing::warn!(
                        "the snowflake worker could not join, retrying in {wait:?}: {e}"
                    );
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    tokio::select! {
                        () = tokio::time::sleep(wait) => continue,
                        () = stopping(&mut stop) => return,
                    }
                }
            };
            backoff = MIN_BACKOFF;
            snowflake.joined(Ok(()));
            snowflake.joins.fetch_add(1, Ordering::Relaxed);
            snowflake.current.store(Some(worker.clone()));
            snowflake.tried.send_replace(true);
            tokio::select! {
                state = worker.stopped() => {
                    snowflake.current.store(None);
                    snowflake.losses.fetch_add(1, Ordering::Relaxed);
                    tracing::error!("the snowflake worker ended ({state:?}): joining again");
                }
                () = stopping(&mut stop) => {
                    snowflake.current.store(None);
                    release(&worker, release_timeout).await;
                    return;
                }
            }
        }
    })
}

/// Stops `worker`, releasing its worker ID, within `timeout`; past it the
/// ID expires with its ttl.
async fn release(worker: &Worker, timeout: Duration) {
    if tokio::time::timeout(timeout, worker.stop()).await.is_err() {
        tracing::warn!(
            "the worker ID was not released within {timeout:?}: it expires with its ttl"
        );
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
pub async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|&stop| stop).await;
}

/// `base` spread over `[base/2, base]`, so that servers that lost the store
/// together do not all come back in the same instant.
fn jittered(base: Duration) -> Duration {
    let half = base / 2;
    let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
    half + Duration::from_micros(rand::rng().random_range(0..spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_the_base() {
        for _ in 0..1000 {
            let d = jittered(Duration::from_secs(1));
            assert!(d >= Duration::from_millis(500) && d <= Duration::from_secs(1));
        }
    }

    #[test]
    fn no_worker_is_not_ready() {
        let s = Snowflake::new(
            Namespace::new("test").unwrap(),
            Holder::new("test:1").unwrap(),
        );
        assert_eq!(
            s.status(),
            Err("no worker holds a lease (joining)".to_string())
        );
        assert!(matches!(s.next_id(), Err(NextIdError::NotReady { .. })));
    }

    #[test]
    fn a_failed_join_says_why_in_fixed_words() {
        use workerid::snowflake::Error;
        let s = Snowflake::new(
            Namespace::new("test").unwrap(),
            Holder::new("test:1").unwrap(),
        );
        let full = Error::Lease(workerid::Error::NoAvailableId { max_worker_id: 0 });
        s.joined(Err(&full));
        assert_eq!(s.status(), Err(JOINING[1].to_string()));
        let down = Error::Lease(workerid::Error::unavailable(
            "redis",
            "10.0.0.5:6379 refused",
        ));
        s.joined(Err(&down));
        assert_eq!(s.status(), Err(JOINING[2].to_string()));
        assert!(matches!(
            s.next_id(),
            Err(NextIdError::NotReady { reason }) if reason == JOINING[2]
        ));
        s.joined(Ok(()));
        assert_eq!(s.status(), Err(JOINING[0].to_string()));
    }
}
