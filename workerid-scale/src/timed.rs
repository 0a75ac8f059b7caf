//! A [`LeaseStore`] wrapper that times every call into the store it wraps:
//! the renew latency the workers see, without touching their code.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use workerid::{
    Capabilities, Grant, Holder, LeaseStore, Listing, Namespace, Result, Token, WorkerId,
};

use crate::histogram::{Histogram, Snapshot};

/// What a [`TimedStore`] has counted so far.
#[derive(Debug, Default)]
pub struct Stats {
    /// Latency of every renewal (successful or not).
    pub renew: Histogram,
    /// Latency of every acquire.
    pub acquire: Histogram,
    renews_ok: AtomicU64,
    renews_failed: AtomicU64,
    acquires: AtomicU64,
    acquires_failed: AtomicU64,
    releases: AtomicU64,
}

/// The counters at one instant; subtract two with [`Counters::since`].
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Renewals the store confirmed.
    pub renews_ok: u64,
    /// Renewals that failed (any error, retryable or not).
    pub renews_failed: u64,
    /// Acquires that succeeded.
    pub acquires: u64,
    /// Acquires that failed.
    pub acquires_failed: u64,
    /// Releases sent.
    pub releases: u64,
    /// Renew latencies.
    pub renew: Snapshot,
    /// Acquire latencies.
    pub acquire: Snapshot,
}

impl Counters {
    /// What happened after `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            renews_ok: self.renews_ok - earlier.renews_ok,
            renews_failed: self.renews_failed - earlier.renews_failed,
            acquires: self.acquires - earlier.acquires,
            acquires_failed: self.acquires_failed - earlier.acquires_failed,
            releases: self.releases - earlier.releases,
            renew: self.renew.since(&earlier.renew),
            acquire: self.acquire.since(&earlier.acquire),
        }
    }
}

impl Stats {
    /// The counters now.
    pub fn counters(&self) -> Counters {
        Counters {
            renews_ok: self.renews_ok.load(Ordering::Relaxed),
            renews_failed: self.renews_failed.load(Ordering::Relaxed),
            acquires: self.acquires.load(Ordering::Relaxed),
            acquires_failed: self.acquires_failed.load(Ordering::Relaxed),
            releases: self.releases.load(Ordering::Relaxed),
            renew: self.renew.snapshot(),
            acquire: self.acquire.snapshot(),
        }
    }
}

/// Forwards every call to the wrapped store and times it.
#[derive(Debug, Clone)]
pub struct TimedStore {
    inner: Arc<dyn LeaseStore>,
    stats: Arc<Stats>,
}

impl TimedStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn LeaseStore>) -> Self {
        TimedStore {
            inner,
            stats: Arc::new(Stats::default()),
        }
    }

    /// The counts and latencies so far.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }
}

fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Times one call; a call dropped before it answered (the allocator's
/// request timeout) still counts, as a failure.
struct Timing<'a> {
    started: Instant,
    latency: &'a Histogram,
    failed: &'a AtomicU64,
}

impl<'a> Timing<'a> {
    fn start(latency: &'a Histogram, failed: &'a AtomicU64) -> Self {
        Timing {
            started: Instant::now(),
            latency,
            failed,
        }
    }

    fn done<T>(self, answer: &Result<T>, ok: &AtomicU64) {
        self.latency.record(self.started.elapsed());
        count(if answer.is_ok() { ok } else { self.failed });
        std::mem::forget(self);
    }
}

impl Drop for Timing<'_> {
    fn drop(&mut self) {
        self.latency.record(self.started.elapsed());
        count(self.failed);
    }
}

#[async_trait]
impl LeaseStore for TimedStore {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        let timing = Timing::start(&self.stats.acquire, &self.stats.acquires_failed);
        let answer = self
            .inner
            .acquire(namespace, max_worker_id, token, ttl, holder)
            .await;
        timing.done(&answer, &self.stats.acquires);
        answer
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        let timing = Timing::start(&self.stats.renew, &self.stats.renews_failed);
        let answer = self.inner.renew(namespace, id, token, ttl, watermark).await;
        timing.done(&answer, &self.stats.renews_ok);
        answer
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        count(&self.stats.releases);
        self.inner.release(namespace, id, token, watermark).await
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        self.inner.list(namespace).await
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        self.inner.force_release(namespace, id).await
    }

    async fn list_namespaces(&self) -> Result<Vec<workerid::NamespaceInfo>> {
        self.inner.list_namespaces().await
    }
    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        self.inner.remove_namespace(namespace).await
    }
}
