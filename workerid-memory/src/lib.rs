//! # workerid-memory
//!
//! [`MemoryStore`]: a [`LeaseStore`] that keeps its leases in this process.
//! Thread-safe, O(log n) acquire whatever the pool size, expiry judged on a
//! monotonic clock that tests can drive ([`ManualClock`]). Nothing survives the
//! process, and other processes cannot see it: use it for tests and for
//! single-process programs; use a server-backed store across processes.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> workerid_core::Result<()> {
//! use workerid_core::{Allocator, LeaseOptions};
//! use workerid_memory::MemoryStore;
//!
//! let allocator = Allocator::new(MemoryStore::new(), "demo", LeaseOptions::new().worker_bits(4))?;
//! let lease = allocator.acquire().await?;
//! assert!(lease.id().get() < 16);
//! allocator.release(&lease).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod clock;
mod pool;
mod segments;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use workerid_core::{
    Capabilities, Error, Grant, Holder, LeaseStore, Listing, Namespace, NamespaceInfo, Result,
    Token, WorkerId,
};

pub use clock::{ManualClock, MonotonicClock, SystemClock};
use pool::Pool;
use segments::Counters;
use workerid_segment::{Range, SegmentStore, Tag, TagInfo};

/// An in-process lease store. Clones share the same leases.
///
/// Capabilities: 1 ms minimum ttl and granularity, 22 worker bits, not
/// durable, lists and force-releases.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use workerid_memory::{ManualClock, MemoryStore};
///
/// let clock = Arc::new(ManualClock::new());
/// let store = MemoryStore::with_clock(clock.clone());
/// // ... acquire a lease with a 1 s ttl, then:
/// clock.advance(Duration::from_secs(2)); // the lease has expired, no sleep
/// ```
#[derive(Debug, Clone)]
pub struct MemoryStore {
    clock: Arc<dyn MonotonicClock>,
    namespaces: Arc<Mutex<HashMap<Namespace, Pool>>>,
    segments: Arc<Mutex<Counters>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store on the system's monotonic clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock::new()))
    }

    /// A store on `clock` (for example a [`ManualClock`] in tests).
    pub fn with_clock(clock: Arc<dyn MonotonicClock>) -> Self {
        MemoryStore {
            clock,
            namespaces: Arc::new(Mutex::new(HashMap::new())),
            segments: Arc::new(Mutex::new(Counters::default())),
        }
    }

    fn namespaces(&self) -> MutexGuard<'_, HashMap<Namespace, Pool>> {
        // The lock is never held across a panic point that leaves a pool half
        // changed, so a poisoned lock still guards consistent data.
        self.namespaces
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn with_pool<T>(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        op: impl FnOnce(&mut Pool, Duration) -> Result<T>,
    ) -> Result<T> {
        let now = self.clock.now();
        match self.namespaces().get_mut(namespace) {
            Some(pool) => op(pool, now),
            None => Err(Error::NotAssigned { id }),
        }
    }
}

#[async_trait]
impl LeaseStore for MemoryStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            list: true,
            ..Capabilities::default()
        }
    }

    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        let now = self.clock.now();
        let mut namespaces = self.namespaces();
        let pool = namespaces
            .entry(namespace.clone())
            .or_insert_with(|| Pool::new(max_worker_id));
        if pool.max_worker_id != max_worker_id {
            return Err(Error::ConfigMismatch {
                namespace: namespace.to_string(),
                stored: pool.max_worker_id,
                requested: max_worker_id,
            });
        }
        pool.acquire(now, token, ttl, holder)
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        self.with_pool(namespace, id, |pool, now| {
            pool.renew(now, id, token, ttl, watermark)
        })
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        self.with_pool(namespace, id, |pool, now| {
            pool.release(now, id, token, watermark)
        })
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        let now = self.clock.now();
        Ok(match self.namespaces().get(namespace) {
            Some(pool) => Listing {
                max_worker_id: Some(pool.max_worker_id),
                leases: pool.list(now),
            },
            None => Listing::unknown(),
        })
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        let now = self.clock.now();
        Ok(self
            .namespaces()
            .get_mut(namespace)
            .is_some_and(|pool| pool.force_release(now, id)))
    }

    async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        let now = self.clock.now();
        let mut all: Vec<NamespaceInfo> = self
            .namespaces()
            .iter()
            .map(|(namespace, pool)| NamespaceInfo {
                namespace: namespace.clone(),
                max_worker_id: pool.max_worker_id,
                live: pool.live(now),
            })
            .collect();
        all.sort_by(|a, b| a.namespace.as_str().cmp(b.namespace.as_str()));
        Ok(all)
    }

    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        let now = self.clock.now();
        let mut namespaces = self.namespaces();
        let Some(pool) = namespaces.get(namespace) else {
            return Ok(false);
        };
        match pool.live(now) {
            0 => Ok(namespaces.remove(namespace).is_some()),
            live => Err(Error::NamespaceInUse {
                namespace: namespace.to_string(),
                live,
            }),
        }
    }
}

impl MemoryStore {
    fn counters(&self) -> MutexGuard<'_, Counters> {
        self.segments
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Segment counters in this process: not durable.
#[async_trait]
impl SegmentStore for MemoryStore {
    /// Every default capability: gapless, listed, give-backs, not durable.
    fn segment_capabilities(&self) -> workerid_segment::SegmentCapabilities {
        workerid_segment::SegmentCapabilities {
            list: true,
            ..Default::default()
        }
    }

    async fn create_tag(
        &self,
        tag: &Tag,
        first_id: u64,
        step: u64,
    ) -> workerid_segment::Result<bool> {
        Ok(self.counters().create(tag, first_id, step))
    }

    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> workerid_segment::Result<Range> {
        self.counters().reserve(tag, step)
    }

    async fn give_back(
        &self,
        tag: &Tag,
        reserved: Range,
        new_max: u64,
    ) -> workerid_segment::Result<bool> {
        self.counters().give_back(tag, reserved, new_max)
    }

    async fn list_tags(&self) -> workerid_segment::Result<Vec<TagInfo>> {
        Ok(self.counters().list())
    }
}
