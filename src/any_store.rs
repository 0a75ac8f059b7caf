//! One handle for any store: both store traits, whichever backend is behind.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use workerid_core::{
    Capabilities, Grant, Holder, LeaseStore, Listing, Namespace, NamespaceInfo, Result, Token,
    WorkerId,
};
use workerid_segment::{self as segment, Range, SegmentStore, Tag, TagInfo};

use workerid_core::observe::{Instrumented, StoreLabels};

use crate::StoreKind;

/// A store that keeps both leases and segment counters (every built-in one).
pub(crate) trait BothStores: LeaseStore + SegmentStore {}

impl<S: LeaseStore + SegmentStore> BothStores for S {}

/// A handle on any store, as [`open`](crate::open) returns it: a
/// [`LeaseStore`] and a [`SegmentStore`] on one connection. Cheap to clone
/// (clones share the connection).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use workerid::{Allocator, LeaseOptions, StoreKind};
///
/// let store = workerid::open("memory://").await?;
/// assert_eq!(store.kind(), StoreKind::Memory);
/// let allocator = Allocator::new(store.clone(), "mycluster", LeaseOptions::new())?;
/// let lease = allocator.acquire().await?;
/// allocator.release(&lease).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AnyStore {
    kind: StoreKind,
    url: Arc<str>,
    inner: Arc<dyn BothStores>,
    /// [`OpenOptions::request_timeout`](crate::OpenOptions::request_timeout),
    /// on every call whatever the store.
    request_timeout: Option<Duration>,
}

impl AnyStore {
    /// Wraps a store that was opened some other way; `url` is how to name it
    /// in messages (its password is hidden here). Its calls are recorded as
    /// [`open`](crate::open)'s are (see [`Instrumented`]), named by `kind`.
    pub fn new<S: LeaseStore + SegmentStore>(kind: StoreKind, url: &str, store: S) -> AnyStore {
        let labels = StoreLabels::new(kind.system_name());
        AnyStore {
            kind,
            url: workerid_core::redact_url(url).into(),
            inner: Arc::new(Instrumented::new(store, labels)),
            request_timeout: None,
        }
    }

    pub(crate) fn from_opened(
        kind: StoreKind,
        redacted_url: &str,
        address: Option<String>,
        inner: Arc<dyn BothStores>,
        request_timeout: Option<Duration>,
    ) -> AnyStore {
        let mut labels = StoreLabels::new(kind.system_name());
        labels.address = address;
        AnyStore {
            kind,
            url: redacted_url.into(),
            inner: Arc::new(Instrumented::new(inner, labels)),
            request_timeout,
        }
    }

    /// Runs `call` within the request timeout, if one was set; past it the
    /// call is dropped (a SQL statement with its connection) and answered
    /// as the store being unavailable, which may or may not have applied it.
    async fn timed<T, E>(
        &self,
        call: impl std::future::Future<Output = std::result::Result<T, E>>,
        timed_out: impl FnOnce(&'static str, String) -> E,
    ) -> std::result::Result<T, E> {
        match self.request_timeout {
            None => call.await,
            Some(limit) => tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
                Err(timed_out(
                    self.kind.system_name(),
                    format!("no answer within the request timeout of {limit:?}"),
                ))
            }),
        }
    }

    /// Which kind of store this is.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The URL it was opened with, password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The lease face alone, as a trait object.
    pub fn lease_store(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.clone())
    }

    /// The segment face alone, as a trait object.
    pub fn segment_store(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.clone())
    }
}

impl fmt::Debug for AnyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The driver's own state (a SQL store's statements, a pool) is
        // kilobytes of text no log line wants.
        f.debug_struct("AnyStore")
            .field("kind", &self.kind)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl LeaseStore for AnyStore {
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
        let call = self
            .inner
            .acquire(namespace, max_worker_id, token, ttl, holder);
        self.timed(call, workerid_core::Error::unavailable).await
    }
    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        self.timed(
            self.inner.renew(namespace, id, token, ttl, watermark),
            workerid_core::Error::unavailable,
        )
        .await
    }
    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        self.timed(
            self.inner.release(namespace, id, token, watermark),
            workerid_core::Error::unavailable,
        )
        .await
    }
    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        self.timed(
            self.inner.list(namespace),
            workerid_core::Error::unavailable,
        )
        .await
    }
    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        self.timed(
            self.inner.force_release(namespace, id),
            workerid_core::Error::unavailable,
        )
        .await
    }
    async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        self.timed(
            self.inner.list_namespaces(),
            workerid_core::Error::unavailable,
        )
        .await
    }
    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        self.timed(
            self.inner.remove_namespace(namespace),
            workerid_core::Error::unavailable,
        )
        .await
    }
}

#[async_trait]
impl SegmentStore for AnyStore {
    fn segment_capabilities(&self) -> workerid_segment::SegmentCapabilities {
        self.inner.segment_capabilities()
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> segment::Result<bool> {
        self.timed(
            self.inner.create_tag(tag, first_id, step),
            segment::Error::unavailable,
        )
        .await
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> segment::Result<Range> {
        self.timed(self.inner.reserve(tag, step), segment::Error::unavailable)
            .await
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> segment::Result<bool> {
        self.timed(
            self.inner.give_back(tag, reserved, new_max),
            segment::Error::unavailable,
        )
        .await
    }
    async fn list_tags(&self) -> segment::Result<Vec<TagInfo>> {
        self.timed(self.inner.list_tags(), segment::Error::unavailable)
            .await
    }
}
