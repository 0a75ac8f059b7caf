//! A store wrapper that records a span and metrics for every call.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use super::observe_store_call;
use crate::{
    Capabilities, Grant, Holder, LeaseStore, Listing, Namespace, NamespaceInfo, Result, Token,
    WorkerId,
};

/// How a store is named in spans and metrics: its kind (`db.system.name`,
/// the `store` label) and, for a server, its address (`server.address`,
/// host and port only: never a user or a password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreLabels {
    /// `"redis"`, `"etcd"`, `"postgresql"`, `"mysql"`, `"sqlite"`, `"memory"`, ...
    pub system: &'static str,
    /// `host:port` of the server, if the store has one.
    pub address: Option<String>,
}

impl StoreLabels {
    /// Labels for a store of kind `system` with no address.
    pub fn new(system: &'static str) -> StoreLabels {
        StoreLabels {
            system,
            address: None,
        }
    }

    /// The same labels with `address` (`host:port`).
    pub fn with_address(mut self, address: impl Into<String>) -> StoreLabels {
        self.address = Some(address.into());
        self
    }
}

/// Any store, recording a `workerid.store` span and the metrics
/// [`STORE_OPERATION_SECONDS`](super::STORE_OPERATION_SECONDS) and
/// [`STORE_ERRORS`](super::STORE_ERRORS) for every call; answers and errors
/// pass through unchanged. It implements
/// [`LeaseStore`] here and `SegmentStore` in `workerid-segment`, for a store
/// that implements them. `workerid::open` wraps every store it opens in it.
///
/// ```
/// use workerid_core::observe::{Instrumented, StoreLabels};
/// use workerid_core::{Allocator, LeaseOptions, LeaseStore};
///
/// fn allocator_on(my_store: impl LeaseStore) -> workerid_core::Result<Allocator> {
///     let labels = StoreLabels::new("mystore").with_address("10.0.0.5:7000");
///     Allocator::new(Instrumented::new(my_store, labels), "cluster", LeaseOptions::new())
/// }
/// ```
#[derive(Clone)]
pub struct Instrumented<S> {
    inner: S,
    labels: StoreLabels,
}

impl<S> Instrumented<S> {
    /// Wraps `inner`, naming it by `labels`.
    pub fn new(inner: S, labels: StoreLabels) -> Instrumented<S> {
        Instrumented { inner, labels }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// How the store is named.
    pub fn labels(&self) -> &StoreLabels {
        &self.labels
    }
}

impl<S: fmt::Debug> fmt::Debug for Instrumented<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The inner store's Debug hides its password; this adds nothing.
        self.inner.fmt(f)
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for Instrumented<S> {
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
        observe_store_call(&self.labels, "acquire", namespace.as_str(), None, call).await
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        let call = self.inner.renew(namespace, id, token, ttl, watermark);
        observe_store_call(
            &self.labels,
            "renew",
            namespace.as_str(),
            Some(id.get()),
            call,
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
        let call = self.inner.release(namespace, id, token, watermark);
        observe_store_call(
            &self.labels,
            "release",
            namespace.as_str(),
            Some(id.get()),
            call,
        )
        .await
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        let call = self.inner.list(namespace);
        observe_store_call(&self.labels, "list", namespace.as_str(), None, call).await
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        let call = self.inner.force_release(namespace, id);
        observe_store_call(
            &self.labels,
            "force_release",
            namespace.as_str(),
            Some(id.get()),
            call,
        )
        .await
    }

    async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        let call = self.inner.list_namespaces();
        observe_store_call(&self.labels, "list_namespaces", "*", None, call).await
    }

    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        let call = self.inner.remove_namespace(namespace);
        observe_store_call(
            &self.labels,
            "remove_namespace",
            namespace.as_str(),
            None,
            call,
        )
        .await
    }
}
