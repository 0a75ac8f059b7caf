//! The store trait every backend implements, and what a store declares about itself.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Error, Holder, Listing, Namespace, NamespaceInfo, Result, Token, WorkerId, MAX_WORKER_BITS,
};

/// What a store can and cannot do, so shared tests adapt instead of failing.
///
/// Fill it in as `Capabilities { durable: true, ..Capabilities::default() }`.
///
/// ```
/// use std::time::Duration;
/// use workerid_core::Capabilities;
/// let etcd_like = Capabilities {
///     min_ttl: Duration::from_secs(2),
///     ttl_granularity: Duration::from_secs(1),
///     durable: true,
///     ..Capabilities::default()
/// };
/// assert_eq!(etcd_like.max_worker_bits, 22);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The shortest ttl the store can keep (default 1 ms).
    pub min_ttl: Duration,
    /// Every ttl must be a whole multiple of this (default 1 ms). A store whose
    /// leases count whole seconds says 1 s; other ttls are refused, never rounded.
    pub ttl_granularity: Duration,
    /// The largest `worker_bits` the store handles (default 22, the contract's maximum).
    pub max_worker_bits: u8,
    /// Whether live leases, fences and watermarks survive a restart of the store
    /// (default false: say true only when it is so).
    pub durable: bool,
    /// How long after its end a lease may still hold its ID (default 0). Only
    /// ever late, never early: etcd, for one, revokes expired leases in a loop
    /// that runs every 500 ms and then commits the revocation through Raft.
    pub expiry_lag: Duration,
    /// Whether an ID whose lease ran out (rather than being released) stays
    /// unavailable for one more of that lease's ttl after the store noticed
    /// (default false). For a store whose expiry is not exact: etcd may delete
    /// an expired owner key early when a leader stalls
    /// ([etcd-io/etcd#15247](https://github.com/etcd-io/etcd/issues/15247)),
    /// while the holder, whose deadline is at most one ttl past that deletion,
    /// still believes in it. Released IDs are free at once either way.
    pub quarantine: bool,
    /// Whether the store implements the operator's methods
    /// [`LeaseStore::list`], [`LeaseStore::force_release`],
    /// [`LeaseStore::list_namespaces`] and [`LeaseStore::remove_namespace`]
    /// (default false: they answer
    /// [`Error::Unsupported`](crate::Error::Unsupported)).
    pub list: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            min_ttl: Duration::from_millis(1),
            ttl_granularity: Duration::from_millis(1),
            max_worker_bits: MAX_WORKER_BITS,
            durable: false,
            expiry_lag: Duration::ZERO,
            quarantine: false,
            list: false,
        }
    }
}

/// What a store answers to a successful [`LeaseStore::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The worker ID granted, in `0..=max_worker_id`.
    pub id: WorkerId,
    /// The fencing token of this grant: higher than every earlier grant's fence
    /// on the same (namespace, ID).
    pub fence: u64,
    /// The highest watermark any earlier holder of this (namespace, ID) stored
    /// (0 if none).
    pub previous_watermark: u64,
}

/// A store of worker-ID leases: the one trait a backend implements.
///
/// A store handle is cheap to share (`Arc<dyn LeaseStore>`); `Arc<S>` and
/// `Box<S>` implement the trait by forwarding. Each method's "Behavior"
/// section is the part of the contract below that it carries; the
/// `workerid-conformance` crate checks every line.
///
#[doc = include_str!("../contract.md")]
#[async_trait]
pub trait LeaseStore: Debug + Send + Sync + 'static {
    /// What this store can do; the allocator checks options against it.
    fn capabilities(&self) -> Capabilities;

    /// Grants a free worker ID of `namespace` to `token` for `ttl`, recording
    /// `holder` as who holds it.
    ///
    /// # Behavior
    /// - The first acquire in a namespace records `max_worker_id`; an acquire
    ///   with another value returns `ConfigMismatch { stored, requested }` and
    ///   changes nothing.
    /// - When `token` already holds a live lease in `namespace` (this acquire
    ///   was sent before and its answer lost): that lease, and no second one.
    ///   It is extended to store-now + `ttl`, its fence and holder label
    ///   unchanged; the answer carries the stored watermark. Found without
    ///   a scan (an index by token, or a key of the token's own).
    /// - Free means never granted, released, or expired (store clock). When
    ///   some ID of `0..=max_worker_id` is free, one of them is granted: it is
    ///   held by `token` until store-now + `ttl`; its fence rises; the answer
    ///   carries the stored watermark as `previous_watermark`; `holder` is
    ///   stored with the grant (replacing the previous holder's label).
    /// - When every ID is held by a live lease: `NoAvailableId`.
    /// - Concurrent acquirers never get the same ID while it is live; racing
    ///   acquirers on one expired ID: exactly one wins.
    ///
    /// # Errors
    /// [`Error::ConfigMismatch`], [`Error::NoAvailableId`] as above;
    /// [`Error::Unavailable`] when the store did not answer, or answered
    /// nonsense: the call may or may not have taken effect.
    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant>;

    /// Extends the lease `token` holds on `id` to store-now + `ttl`.
    ///
    /// # Behavior
    /// - Held by `token` and live: extended; watermark = max(stored, `watermark`).
    /// - Held by `token` but expired (and not granted again): `TokenExpired`;
    ///   nothing changes.
    /// - Held (live or expired) by another token: `TokenMismatch`; nothing changes.
    /// - Never granted, or released: `NotAssigned`.
    ///
    /// # Errors
    /// [`Error::TokenExpired`], [`Error::TokenMismatch`],
    /// [`Error::NotAssigned`] as above;
    /// [`Error::Unavailable`] when the store did not answer, or answered
    /// nonsense: the call may or may not have taken effect.
    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()>;

    /// Ends the lease `token` holds on `id`, freeing the ID at once.
    ///
    /// # Behavior
    /// - Held by `token` and live: freed; the fence is kept (the next grant
    ///   raises it). A `watermark` above 0 is the holder's final word and
    ///   replaces the stored one (even a higher one its renewals reserved);
    ///   0 leaves the stored one as it is. The [`Allocator`](crate::Allocator)
    ///   never sends one below the lease's `previous_watermark`.
    /// - Held by `token` but expired (and not granted again): `TokenExpired`
    ///   (the ID is free anyway).
    /// - Held (live or expired) by another token: `TokenMismatch`; nothing changes.
    /// - Never granted, or already released: `NotAssigned`.
    ///
    /// # Errors
    /// [`Error::TokenExpired`], [`Error::TokenMismatch`],
    /// [`Error::NotAssigned`] as above;
    /// [`Error::Unavailable`] when the store did not answer, or answered
    /// nonsense: the call may or may not have taken effect.
    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()>;

    /// Every worker ID of `namespace` ever granted, with its state, fence and
    /// watermark: what an operator looks at. Optional: only when
    /// [`Capabilities::list`] is true.
    ///
    /// # Behavior
    /// - A namespace never used: `max_worker_id` is `None` and no leases.
    /// - Otherwise the stored `max_worker_id`, and exactly one entry per ID
    ///   ever granted, ordered by ID: [`LeaseState::Live`](crate::LeaseState::Live)
    ///   with the time left on the store's clock, `Expired`, or `Free`
    ///   (released); its latest fence, its stored watermark and the holder
    ///   label of its latest grant. IDs never granted are not listed.
    /// - One consistent read where the store allows it (one script, one
    ///   statement); it changes nothing.
    /// - Default: [`Error::Unsupported`] (not retryable).
    ///
    /// # Errors
    /// [`Error::Unsupported`] by default;
    /// [`Error::Unavailable`] when the store did not answer, or answered
    /// nonsense.
    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        let _ = namespace;
        Err(Error::Unsupported { operation: "list" })
    }

    /// An operator's forced release of `id`, whatever token holds it.
    /// Optional: only when [`Capabilities::list`] is true.
    ///
    /// # Behavior
    /// - Held by a live lease: freed at once, as if its holder had released
    ///   it; the watermark and the fence are kept (the next grant's fence is
    ///   higher than every earlier one). Returns true.
    /// - The former holder's later renew or release answers
    ///   [`Error::NotAssigned`] (a released ID), never success.
    /// - Expired, released, never granted, or a namespace never used: nothing
    ///   changes (the ID is free already). Returns false.
    /// - One atomic step; the caller checks `id` against the pool beforehand.
    /// - Default: [`Error::Unsupported`] (not retryable).
    ///
    /// # Errors
    /// [`Error::Unsupported`] by default;
    /// [`Error::Unavailable`] when the store did not answer, or answered
    /// nonsense: the call may or may not have taken effect.
    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        let _ = (namespace, id);
        Err(Error::Unsupported {
            operation: "force_release",
        })
    }

    /// Every namespace of the store, with its pool size and live count: an
    /// operator's first look. Optional: only when [`Capabilities::list`] is
    /// true.
    ///
    /// # Behavior
    /// - One entry per namespace in which a worker ID was ever granted,
    ///   ordered by name, with the `max_worker_id` it was created with and
    ///   how many of its IDs a live lease holds (store clock).
    /// - It changes nothing; it may read the namespaces one after another
    ///   (not one consistent snapshot of all of them).
    /// - Default: [`Error::Unsupported`] (not retryable).
    ///
    /// # Errors
    /// [`Error::Unsupported`] by default;
    /// [`Error::Unavailable`] when the store did not answer, or answered
    /// nonsense.
    async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        Err(Error::Unsupported {
            operation: "list_namespaces",
        })
    }

    /// Removes `namespace` when no live lease holds any of its IDs: its pool
    /// size and every ID's fence, watermark and holder label. Optional: only
    /// when [`Capabilities::list`] is true. For namespaces whose IDs no
    /// longer matter (a benchmark's scratch namespace): a namespace made
    /// again starts from fence 1 and watermark 0, so its new holders are not
    /// kept after the old ones' timestamps.
    ///
    /// # Behavior
    /// - No ID held by a live lease (store clock): every key, row or entry
    ///   of the namespace is gone; it lists as never used. Returns true.
    /// - A namespace never used: nothing changes. Returns false.
    /// - Some ID held by a live lease: [`Error::NamespaceInUse`] with the
    ///   live count; nothing changes.
    /// - One atomic step: an acquire racing it either is refused the removal
    ///   (it sees the live lease) or comes after it and makes the namespace
    ///   anew.
    /// - Default: [`Error::Unsupported`] (not retryable).
    ///
    /// # Errors
    /// [`Error::NamespaceInUse`] as above; [`Error::Unsupported`] by
    /// default;
    /// [`Error::Unavailable`] when the store did not answer, or answered
    /// nonsense: the call may or may not have taken effect.
    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        let _ = namespace;
        Err(Error::Unsupported {
            operation: "remove_namespace",
        })
    }
}

macro_rules! forward_lease_store {
    ($($wrapper:ty),+) => {$(
        #[async_trait]
        impl<S: LeaseStore + ?Sized> LeaseStore for $wrapper {
            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }
            async fn acquire(
                &self,
                namespace: &Namespace,
                max_worker_id: u32,
                token: &Token,
                ttl: Duration,
                holder: &Holder,
            ) -> Result<Grant> {
                (**self).acquire(namespace, max_worker_id, token, ttl, holder).await
            }
            async fn renew(
                &self,
                namespace: &Namespace,
                id: WorkerId,
                token: &Token,
                ttl: Duration,
                watermark: u64,
            ) -> Result<()> {
                (**self).renew(namespace, id, token, ttl, watermark).await
            }
            async fn release(
                &self,
                namespace: &Namespace,
                id: WorkerId,
                token: &Token,
                watermark: u64,
            ) -> Result<()> {
                (**self).release(namespace, id, token, watermark).await
            }
            async fn list(&self, namespace: &Namespace) -> Result<Listing> {
                (**self).list(namespace).await
            }
            async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
                (**self).force_release(namespace, id).await
            }
            async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
                (**self).list_namespaces().await
            }
            async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
                (**self).remove_namespace(namespace).await
            }
        }
    )+};
}

forward_lease_store!(Arc<S>, Box<S>);
