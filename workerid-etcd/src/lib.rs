//! # workerid-etcd
//!
//! [`EtcdStore`]: a [`LeaseStore`](workerid_core::LeaseStore) and
//! [`SegmentStore`](workerid_segment::SegmentStore) on etcd (v3 API).
//!
//! - **Expiry rides on etcd leases**: each grant has its own etcd lease (of
//!   the requested ttl plus one second, see below), and the key that says
//!   "ID 7 is held" is attached to it, so etcd deletes it when the lease
//!   runs out: expiry is judged by the etcd leader, never by a client's
//!   clock. etcd counts lease ttls in whole seconds and has a minimum (2 s
//!   with default server settings): the store declares both in its
//!   [`Capabilities`](workerid_core::Capabilities).
//! - **Every write is one guarded transaction** that compares the owner before
//!   it writes. Acquire is one transaction that tries one candidate ID, or up
//!   to 8 at once after a lost round (nested `if absent then take` branches),
//!   on an etcd lease granted ahead of time (granted for the ttl plus one
//!   second, so that one granted in the last second needs no keep-alive; an
//!   older one gets a keep-alive sent with the transaction; with none ready,
//!   a grant first), renew a keep-alive sent together with one transaction
//!   (or a grant plus a transaction when the ttl changes), release one
//!   transaction.
//! - **A renewal on a one-member cluster is a keep-alive alone** when the
//!   worker asks for no higher watermark: the owner key rides on the etcd
//!   lease, and a force release revokes that lease before it answers, so the
//!   keep-alive fails whenever the transaction would. With more members the
//!   transaction (a linearizable read) stays: a stale leader can answer a
//!   keep-alive for a lease its successor revoked
//!   ([etcd-io/etcd#15247](https://github.com/etcd-io/etcd/issues/15247)).
//!   The store counts the members when it connects and at every cluster
//!   check ([`EtcdStoreBuilder::leader_check_interval`]).
//! - **No scan per acquire**: candidates come from a per-namespace mirror of
//!   the held IDs, kept current by an etcd watch of deletions only (a grant
//!   costs no watch event). The transaction decides: each candidate's take
//!   also compares the mod revision of its `ownership/` record with the one
//!   the mirror judged free, so a grant the mirror has not seen always fails
//!   it. `NoAvailableId` is only answered after etcd itself counted the pool
//!   full, or read the namespace and found every free ID in quarantine.
//! - **Fence and watermark outlive the lease**: the fence of a grant is the
//!   etcd revision of its transaction (it only rises, across restarts too);
//!   the watermark lives in a key with no lease, raised with a value
//!   comparison inside the same transaction that checks the token.
//! - **Node failures**: the store talks to one endpoint at a time and moves to
//!   the next when a request fails for a reason another member may not have.
//!   Every request is safe to send twice (a resent acquire first looks for a
//!   candidate its token owns already; a retried release recognises that its
//!   first sending deleted the owner and its `ownership/` record, reading
//!   the keys as of the revision before the next grant when another token
//!   was granted the freed ID in between), so retries never double-grant or
//!   misreport. Without a quorum every operation ends
//!   in `Unavailable` after the configured operation timeout, never in a
//!   false success.
//! - **Expired IDs wait one more ttl** before they are granted again (a
//!   released ID does not). etcd's leases are not exact when a leader stalls:
//!   a stalled old leader can still revoke a lease its successor renewed, or
//!   answer a keep-alive it no longer owns
//!   ([etcd-io/etcd#15247](https://github.com/etcd-io/etcd/issues/15247),
//!   fixed only in part by later releases), so the owner key can vanish while
//!   its holder still believes in its lease for up to one ttl. The store
//!   declares this as [`Capabilities::quarantine`](workerid_core::Capabilities).
//!
//! ```no_run
//! # async fn demo() -> workerid_core::Result<()> {
//! use std::time::Duration;
//! use workerid_core::{Allocator, LeaseOptions};
//! use workerid_etcd::EtcdStore;
//!
//! let store = EtcdStore::connect(["http://127.0.0.1:2379"]).await?;
//! let options = LeaseOptions::new().worker_bits(8).ttl(Duration::from_secs(10));
//! let allocator = Allocator::new(store, "mycluster", options)?;
//! let lease = allocator.acquire().await?;
//! # Ok(()) }
//! ```
//!
//! The keys, per namespace, are described in the crate's `keys` module; a
//! prefix (default `workerid`) keeps them apart from other data.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod acquire;
mod builder;
mod cluster;
mod connector;
mod held;
mod keepalive;
mod keys;
mod leader;
mod lease;
mod lessor;
mod listing;
mod member;
mod mirror;
mod segments;
mod spare;
#[cfg(feature = "tls-rustls")]
mod tls;
mod txn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use builder::EtcdStoreBuilder;
use cluster::Cluster;
use keys::Keys;
pub use keys::DEFAULT_PREFIX;
use mirror::{Mirror, Mirrors};
use workerid_core::{Namespace, Result, Token};

/// A lease store (and segment store) on an etcd cluster. Cheap to clone:
/// clones share connections, watches and caches.
///
/// Capabilities: minimum ttl 2 s (configurable with
/// [`EtcdStoreBuilder::min_ttl`] for servers with other election settings),
/// ttls in whole seconds, 22 worker bits, durable.
#[derive(Clone, Debug)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

/// What this process knows about a lease it holds: the etcd lease the
/// `owner/` key rides on, so that renew can send a keep-alive.
#[derive(Debug, Clone)]
struct HeldLease {
    token: Token,
    lease: i64,
    ttl_secs: i64,
    /// When the last grant or keep-alive of the etcd lease was sent: the
    /// lease lasts at least `ttl_secs` from then.
    extended: std::time::Instant,
}

#[derive(Debug)]
struct Inner {
    cluster: Arc<Cluster>,
    prefix: String,
    min_ttl: Duration,
    candidates: usize,
    mirrors: Mutex<Mirrors>,
    held: Mutex<HashMap<(String, u32), HeldLease>>,
    /// Each tag's last seen counter and its revision, to reserve in one
    /// round trip when nobody else reserved since.
    tags: Mutex<HashMap<String, segments::Seen>>,
    /// etcd leases granted ahead of the acquires that will use them.
    spares: spare::Spares,
    /// The keep-alive streams every held lease renews on.
    keep_alives: keepalive::KeepAlives,
    /// How long one request may take (a keep-alive on an open stream too).
    request_timeout: Duration,
    /// One lock per tag: reservations from this process take turns instead
    /// of racing each other's compare-and-swap.
    tag_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl EtcdStore {
    /// Options: credentials, key prefix, timeouts, minimum ttl; then connect.
    pub fn builder() -> EtcdStoreBuilder {
        EtcdStoreBuilder::default()
    }

    /// Connects to the cluster at `endpoints` (`http://host:port`, any
    /// number of members) with the default options.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](workerid_core::Error::InvalidConfig) for no
    /// or bad endpoints; [`Error::Unavailable`](workerid_core::Error::Unavailable)
    /// when no member answers a linearizable read within the operation
    /// timeout (5 s by default).
    pub async fn connect<E: AsRef<str>>(endpoints: impl IntoIterator<Item = E>) -> Result<Self> {
        Self::builder().connect(endpoints).await
    }

    /// The etcd client of the member the store talks to now, for raw etcd
    /// requests beside the store's (a benchmark's baseline, a health check).
    ///
    /// # Errors
    /// [`Error::Unavailable`](workerid_core::Error::Unavailable) when the
    /// member cannot be connected to.
    pub async fn client(&self) -> Result<etcd_client::Client> {
        self.inner.cluster.current().await.map(|(_, client)| client)
    }

    /// The mirror of `namespace`'s held IDs, made on first use.
    fn mirror(&self, namespace: &Namespace, keys: &Keys, max_worker_id: u32) -> Arc<Mirror> {
        lock(&self.inner.mirrors).get_or_make((namespace.as_str(), max_worker_id), || {
            Mirror::new(keys.clone(), max_worker_id)
        })
    }

    /// Revokes an etcd lease and waits for etcd to have done it: a
    /// keep-alive sent after this returns fails. A lease etcd no longer has
    /// counts as revoked.
    ///
    /// # Errors
    /// [`Error::Unavailable`](workerid_core::Error::Unavailable) when no
    /// member revoked it within the operation timeout.
    async fn revoke_now(&self, lease: i64) -> Result<()> {
        self.inner.keep_alives.close(lease);
        self.inner
            .cluster
            .call("lease revoke", |mut c| async move {
                match c.lease_revoke(lease).await {
                    Ok(_) => Ok(()),
                    Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => {
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            })
            .await
            .map(|_| ())
    }

    /// Revokes an etcd lease nobody needs any more, without waiting (it would
    /// run out by itself; revoking frees it on the server at once).
    fn revoke_later(&self, lease: i64) {
        self.inner.keep_alives.close(lease);
        let cluster = self.inner.cluster.clone();
        tokio::spawn(async move {
            let revoked = cluster
                .call("lease revoke", |mut c| async move {
                    c.lease_revoke(lease).await
                })
                .await;
            if let Err(e) = revoked {
                tracing::debug!("revoking etcd lease {lease:x}: {e}");
            }
        });
    }
}

/// `Unavailable` for an answer etcd cannot have given to `what`, as a lease
/// or a segment error. Named by its type, not shown: its values may be
/// other holders' lease tokens.
fn nonsense<E: From<workerid_core::Error>>(what: &str, answer: &impl std::fmt::Debug) -> E {
    let kind = std::any::type_name_of_val(answer);
    workerid_core::Error::unavailable(
        "etcd",
        format!("unexpected answer to {what} (a {kind}, not shown: it may hold tokens)"),
    )
    .into()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
