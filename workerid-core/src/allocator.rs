//! The API users call: acquire, renew and release worker IDs of one namespace.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use meters::Meters;

use crate::{
    Capabilities, Error, Grant, Holder, Lease, LeaseOptions, LeaseStore, Listing, Namespace,
    Result, Token, WorkerId,
};

mod meters;

/// Leases worker IDs of one namespace from a [`LeaseStore`] (libx.net/workerid's `Generator`).
///
/// Every input is checked before any I/O; tokens are generated here; the local
/// deadline of a lease counts from the instant its request was sent. Cheap to
/// clone (clones share one allocator). Needs a Tokio runtime (for the request
/// timeout).
///
/// An acquire that ends in [`Error::Unavailable`] may have been granted with
/// its answer lost: the next acquire (of this allocator or a clone) sends the
/// same token, and the store answers with that grant instead of making a
/// second one, so no worker ID is left held by nobody until its ttl runs out.
/// The token is sent again until a grant answers it, even after answers such
/// as [`Error::NoAvailableId`]: the lost sending may be applied later still
/// (queued behind a partition), and its grant is then the next acquire's.
///
/// With a [`Lease`] handle: [`acquire`](Self::acquire),
/// [`renew`](Self::renew), [`release`](Self::release). libx.net/workerid's
/// calls, with the ID and the token string, are in [`crate::compat`].
///
/// ```
/// use workerid_core::{Allocator, LeaseOptions, LeaseStore};
///
/// async fn demo(store: impl LeaseStore) -> workerid_core::Result<()> {
///
///     let allocator = Allocator::new(store, "orders", LeaseOptions::new().worker_bits(4))?;
///     let mut lease = allocator.acquire().await?;
///     allocator.renew(&mut lease).await?;
///     allocator.release(&lease).await?;
///     Ok(())
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Allocator {
    store: Arc<dyn LeaseStore>,
    namespace: Namespace,
    max_worker_id: u32,
    options: LeaseOptions,
    capabilities: Capabilities,
    holder: Holder,
    /// Tokens of acquires that may still be applied (their answer was
    /// lost), sent again by the next acquires, the latest first.
    unanswered: Arc<Mutex<Vec<Token>>>,
    meters: Arc<Meters>,
}

impl Allocator {
    /// An allocator for `namespace` on `store`.
    ///
    /// No I/O: the pool size is recorded (or checked) by the store on the
    /// first acquire.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad namespace or options, options
    /// beyond the store's [`Capabilities`], or (when the options name no
    /// holder) a `WORKERID_HOLDER` that is not a valid [`Holder`].
    pub fn new(store: impl LeaseStore, namespace: &str, options: LeaseOptions) -> Result<Self> {
        Self::from_arc(Arc::new(store), namespace, options)
    }

    /// Like [`Allocator::new`], for a store already shared as `Arc<dyn LeaseStore>`.
    ///
    /// # Errors
    /// As [`Allocator::new`].
    pub fn from_arc(
        store: Arc<dyn LeaseStore>,
        namespace: &str,
        options: LeaseOptions,
    ) -> Result<Self> {
        let namespace = Namespace::new(namespace)?;
        let capabilities = store.capabilities();
        options.validate(&capabilities)?;
        let holder = match options.get_holder() {
            Some(holder) => holder.clone(),
            None => Holder::from_env()?,
        };
        Ok(Allocator {
            meters: Arc::new(Meters::new(&namespace)),
            holder,
            max_worker_id: options.pool_max_worker_id()?,
            store,
            namespace,
            options,
            capabilities,
            unanswered: Arc::default(),
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The largest worker ID of the pool.
    pub fn max_worker_id(&self) -> u32 {
        self.max_worker_id
    }

    /// The label stored with every lease this allocator takes.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// The options.
    pub fn options(&self) -> &LeaseOptions {
        &self.options
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn LeaseStore> {
        &self.store
    }

    /// Leases a free worker ID for the default ttl.
    ///
    /// # Cancellation
    /// Safe to drop before it returns (under a timeout, in a `select!`):
    /// the store may grant the call all the same, so its token is sent
    /// again by this allocator's (or a clone's) next acquire, which adopts
    /// that grant. A grant no later acquire adopts expires with its ttl.
    ///
    /// # Errors
    /// [`Error::NoAvailableId`] when every ID is held;
    /// [`Error::ConfigMismatch`] when the namespace was created with another pool
    /// size; [`Error::Unavailable`] when the store cannot answer.
    pub async fn acquire(&self) -> Result<Lease> {
        self.acquire_with_ttl(self.options.default_ttl()).await
    }

    /// Leases a free worker ID for `ttl`.
    ///
    /// # Errors
    /// As [`Allocator::acquire`], and [`Error::InvalidConfig`] for a ttl out of
    /// bounds (checked before any I/O).
    pub async fn acquire_with_ttl(&self, ttl: Duration) -> Result<Lease> {
        self.options.check_ttl(ttl, &self.capabilities)?;
        let unanswered = self.unanswered().pop();
        let token = unanswered.unwrap_or_else(Token::generate);
        let sent = Instant::now();
        let in_flight = InFlight {
            allocator: self,
            token: Some(token),
        };
        let answer = self
            .call(self.store.acquire(
                &self.namespace,
                self.max_worker_id,
                &token,
                ttl,
                &self.holder,
            ))
            .await
            .and_then(|grant| self.check_grant(grant));
        in_flight.answered();
        let grant = match answer {
            Ok(grant) => grant,
            Err(err) => {
                if matches!(err, Error::NoAvailableId { .. }) {
                    self.meters.pool_full();
                }
                // A token sent before may still be applied (a request
                // queued behind a partition, delivered after this answer):
                // it stays the next acquire's until a grant answers it, so
                // that grant is adopted rather than left to expire.
                if err.is_retryable() || unanswered.is_some() {
                    self.keep_token(token);
                }
                return Err(err);
            }
        };
        if unanswered.is_some() {
            tracing::info!(namespace = %self.namespace, id = %grant.id, fence = grant.fence,
                "an acquire whose answer was lost is answered by its own grant");
        }
        tracing::debug!(namespace = %self.namespace, id = %grant.id, fence = grant.fence, "acquired");
        self.meters.granted();
        Ok(Lease {
            namespace: self.namespace.clone(),
            id: grant.id,
            token,
            fence: grant.fence,
            ttl,
            deadline: self.deadline(sent, ttl),
            previous_watermark: grant.previous_watermark,
        })
    }

    /// `grant`, unless it is not a grant of this pool.
    fn check_grant(&self, grant: Grant) -> Result<Grant> {
        if grant.id.get() > self.max_worker_id || grant.fence == 0 {
            return Err(Error::unavailable(
                "lease store",
                format!(
                    "the store answered nonsense: {grant:?} for a pool of 0..={}",
                    self.max_worker_id
                ),
            ));
        }
        Ok(grant)
    }

    /// Keeps `lease` for the next acquire, when its holder could neither use
    /// it nor release it (the store did not answer): the next acquire of
    /// this allocator or a clone sends its token, and while the lease is
    /// live the store answers with it rather than granting another ID, so
    /// the ID is not held by no one until its ttl runs out. A lease of
    /// another namespace is ignored.
    pub fn keep_for_next_acquire(&self, lease: &Lease) {
        if lease.namespace == self.namespace {
            self.keep_token(lease.token);
        }
    }

    /// The tokens kept for the next acquires.
    fn unanswered(&self) -> std::sync::MutexGuard<'_, Vec<Token>> {
        self.unanswered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `token` for the next acquire. A few are kept (acquires of
    /// clones may fail side by side); the oldest goes first past that.
    fn keep_token(&self, token: Token) {
        const KEPT: usize = 8;
        let mut kept = self.unanswered();
        kept.retain(|t| *t != token);
        if kept.len() == KEPT {
            kept.remove(0);
        }
        kept.push(token);
    }

    /// Renews `lease` for its ttl and moves its local deadline.
    ///
    /// Returns the new deadline. On error the deadline is left as it was.
    ///
    /// # Errors
    /// [`Error::TokenExpired`], [`Error::TokenMismatch`], [`Error::NotAssigned`]
    /// when the lease is lost (see [`Error::is_lease_lost`]);
    /// [`Error::InvalidConfig`] for a lease of another namespace;
    /// [`Error::Unavailable`] when the store cannot answer.
    pub async fn renew(&self, lease: &mut Lease) -> Result<Instant> {
        self.renew_with_watermark(lease, 0).await
    }

    /// Renews `lease` and raises the stored watermark to at least `watermark`.
    ///
    /// # Errors
    /// As [`Allocator::renew`].
    pub async fn renew_with_watermark(&self, lease: &mut Lease, watermark: u64) -> Result<Instant> {
        self.check_own(lease)?;
        let sent = Instant::now();
        let answer = self
            .call(self.store.renew(
                &self.namespace,
                lease.id,
                &lease.token,
                lease.ttl,
                watermark,
            ))
            .await;
        self.meters.renewed(sent, answer.is_ok());
        answer?;
        lease.deadline = self.deadline(sent, lease.ttl);
        Ok(lease.deadline)
    }

    /// Releases `lease`: the ID is free at once.
    ///
    /// # Errors
    /// As [`Allocator::renew`].
    pub async fn release(&self, lease: &Lease) -> Result<()> {
        self.release_with_watermark(lease, 0).await
    }

    /// Releases `lease`, leaving `watermark` for the next holder: the
    /// highest timestamp this holder issued (it replaces what the lease's
    /// renewals reserved, so the next holder need not wait for a window that
    /// was never used). Never below the lease's
    /// [`previous_watermark`](Lease::previous_watermark): earlier holders'
    /// bounds are kept. 0 leaves the stored watermark as it is.
    ///
    /// # Errors
    /// As [`Allocator::renew`].
    pub async fn release_with_watermark(&self, lease: &Lease, watermark: u64) -> Result<()> {
        self.check_own(lease)?;
        let watermark = match watermark {
            0 => 0,
            given => given.max(lease.previous_watermark),
        };
        self.call(
            self.store
                .release(&self.namespace, lease.id, &lease.token, watermark),
        )
        .await?;
        tracing::debug!(namespace = %self.namespace, id = %lease.id, "released");
        self.meters.released();
        Ok(())
    }

    /// Renews the lease `token` holds on `id` with the default ttl, leaving
    /// the watermark as it is: the calls of [`crate::compat`].
    pub(crate) async fn renew_by_text(&self, id: u64, token: &str) -> Result<()> {
        let (id, token) = self.parse(id, token)?;
        let ttl = self.options.default_ttl();
        self.call(self.store.renew(&self.namespace, id, &token, ttl, 0))
            .await
    }

    /// Releases the lease `token` holds on `id`: the calls of [`crate::compat`].
    pub(crate) async fn release_by_text(&self, id: u64, token: &str) -> Result<()> {
        let (id, token) = self.parse(id, token)?;
        self.call(self.store.release(&self.namespace, id, &token, 0))
            .await
    }

    /// Every worker ID of the namespace ever granted, with its state, fence
    /// and watermark (see [`LeaseStore::list`]).
    ///
    /// ```
    /// # async fn demo(allocator: workerid_core::Allocator) -> workerid_core::Result<()> {
    /// let listing = allocator.list().await?;
    /// for lease in listing.live() {
    ///     println!("worker {} fence {} {:?}", lease.id, lease.fence, lease.state);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Unsupported`] before any I/O when the store does not declare
    /// [`Capabilities::list`]; [`Error::Unavailable`] when the store cannot
    /// answer.
    pub async fn list(&self) -> Result<Listing> {
        self.check_listing("list")?;
        let listing = self.call(self.store.list(&self.namespace)).await?;
        if listing.is_known() {
            self.meters
                .listed(&listing, u64::from(self.max_worker_id) + 1);
        }
        Ok(listing)
    }

    /// An operator's forced release of worker ID `id`, whatever token holds
    /// it; true if a live lease held it (see [`LeaseStore::force_release`]).
    /// Its holder's next renew or release answers [`Error::NotAssigned`].
    ///
    /// # Errors
    /// [`Error::InvalidWorkerId`] and [`Error::Unsupported`] before any I/O;
    /// [`Error::Unavailable`] when the store cannot answer.
    pub async fn force_release(&self, id: u64) -> Result<bool> {
        let id = WorkerId::checked(id, self.max_worker_id)?;
        self.check_listing("force_release")?;
        let freed = self
            .call(self.store.force_release(&self.namespace, id))
            .await?;
        tracing::info!(namespace = %self.namespace, %id, freed, "forced release");
        Ok(freed)
    }

    fn check_listing(&self, operation: &'static str) -> Result<()> {
        if self.capabilities.list {
            Ok(())
        } else {
            Err(Error::Unsupported { operation })
        }
    }

    fn parse(&self, id: u64, token: &str) -> Result<(WorkerId, Token)> {
        let id = WorkerId::checked(id, self.max_worker_id)?;
        Ok((id, Token::parse(token)?))
    }

    fn check_own(&self, lease: &Lease) -> Result<()> {
        if lease.namespace != self.namespace {
            return Err(Error::invalid_config(format!(
                "the lease belongs to namespace {:?}, this allocator to {:?}",
                lease.namespace.as_str(),
                self.namespace.as_str()
            )));
        }
        WorkerId::checked(u64::from(lease.id), self.max_worker_id)?;
        Ok(())
    }

    fn deadline(&self, sent: Instant, ttl: Duration) -> Instant {
        sent + ttl - self.options.drift_margin(ttl)
    }

    async fn call<T>(&self, request: impl Future<Output = Result<T>>) -> Result<T> {
        let timeout = self.options.get_request_timeout();
        match tokio::time::timeout(timeout, request).await {
            Ok(answer) => answer,
            Err(_) => Err(Error::timed_out("lease store", timeout)),
        }
    }
}

/// The token of an acquire sent and not answered yet. Dropped unanswered
/// (the caller's timeout or a cancelled task dropped the call), it is kept
/// for the next acquire: the store may have granted it all the same, and
/// that grant is then adopted rather than held by nobody for a ttl.
struct InFlight<'a> {
    allocator: &'a Allocator,
    token: Option<Token>,
}

impl InFlight<'_> {
    /// The call returned: its answer decides what becomes of the token.
    fn answered(mut self) {
        self.token = None;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.allocator.keep_token(token);
        }
    }
}

#[cfg(test)]
mod tests;
