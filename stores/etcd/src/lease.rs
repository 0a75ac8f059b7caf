//! The lease contract on etcd: acquire, renew and release as guarded
//! transactions.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};
use workerid_lease::{
    Capabilities, Error, Grant, LeaseStore, Listing, Namespace, Result, Token, WorkerId,
};

use crate::keys::{Keys, Ownership};
use crate::mirror::{scan, Candidate, Mirror};
use crate::txn::{acquire_txn, got, guarded, parse_acquire, raise_mark, refusal, Acquired};
use crate::{lock, nonsense, EtcdStore, HeldLease};

/// How many transactions one acquire may lose to other acquirers before it
/// gives up with `Unavailable` (each lost round means other processes got IDs).
const ROUNDS: usize = 32;

/// Candidates in an acquire's first round (later rounds: the store's
/// `candidates`).
const FIRST_CANDIDATES: usize = 1;

/// etcd counts lease ttls in whole seconds (the allocator only lets whole
/// seconds through: the granularity is declared).
fn ttl_secs(ttl: Duration) -> i64 {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
}

/// Every etcd lease the store grants lives this much longer than the ttl it
/// carries a worker ID for, so that a spare lease granted less than this long
/// ago still covers a whole ttl and acquire can use it without a keep-alive:
/// acquire is then one transaction. Renewals extend to the same length, so a
/// lease may outlive its holder's deadline by this much more (declared in
/// [`Capabilities::expiry_lag`]).
pub(crate) const LEASE_SLACK: Duration = Duration::from_secs(1);

impl EtcdStore {
    pub(crate) async fn txn(
        &self,
        what: &'static str,
        txn: Txn,
    ) -> Result<crate::cluster::Answer<TxnResponse>> {
        self.inner
            .cluster
            .call(what, |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await
    }

    /// A new etcd lease for `ttl` (granted for `ttl` + [`LEASE_SLACK`]):
    /// (lease ID, ttl in seconds).
    async fn grant(&self, ttl: Duration) -> Result<(i64, i64)> {
        let secs = ttl_secs(ttl);
        let granted = secs.saturating_add(ttl_secs(LEASE_SLACK));
        let answer = self
            .inner
            .cluster
            .call("lease grant", |mut c| async move {
                c.lease_grant(granted, None).await
            })
            .await?
            .value;
        if answer.ttl() <= 0 || !answer.error().is_empty() {
            return Err(nonsense("lease grant", &answer));
        }
        Ok((answer.id(), secs))
    }

    /// Sends one keep-alive for `lease`; false when etcd no longer has it.
    /// On the lease's open stream if it has one (see [`crate::keepalive`]);
    /// else on a new stream, which stays open for the next time.
    async fn keep_alive(&self, lease: i64) -> Result<bool> {
        let open = &self.inner.keep_alives;
        if let Some(alive) = open.send(lease, self.inner.request_timeout).await {
            return Ok(alive);
        }
        let opened = self
            .inner
            .cluster
            .call("lease keep-alive", |mut c| async move {
                match c.lease_keep_alive(lease).await {
                    Ok(pair) => Ok(Some(pair)),
                    Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(None),
                    Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => {
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            })
            .await?
            .value;
        Ok(match opened {
            Some((keeper, stream)) => {
                open.keep(lease, keeper, stream);
                true
            }
            None => false,
        })
    }

    /// Whether etcd counts `max_worker_id + 1` live owners: the authoritative
    /// "no ID is free".
    async fn full(&self, keys: &Keys, max_worker_id: u32) -> Result<bool> {
        let prefix = keys.owners();
        let answer = self
            .inner
            .cluster
            .call("count", |mut c| {
                let prefix = prefix.clone();
                async move {
                    c.get(
                        prefix,
                        Some(GetOptions::new().with_prefix().with_count_only()),
                    )
                    .await
                }
            })
            .await?
            .value;
        Ok(answer.count() > i64::from(max_worker_id))
    }

    /// Fresh candidates from etcd itself (and a fresh mirror); empty when
    /// the pool is full.
    async fn candidates_from_etcd(
        &self,
        keys: &Keys,
        mirror: &std::sync::Arc<Mirror>,
    ) -> Result<Vec<Candidate>> {
        if self.full(keys, mirror.max_worker_id()).await? {
            // Watch from now on: an ID that expires later is seen going (and
            // its quarantine counted) from that moment.
            mirror.follow(self.inner.cluster.clone());
            return Ok(Vec::new());
        }
        let snapshot = scan(&self.inner.cluster, keys).await?;
        mirror.install(&snapshot);
        mirror.follow(self.inner.cluster.clone());
        Ok(mirror.candidates(self.inner.candidates))
    }

    async fn take(
        &self,
        namespace: &Namespace,
        keys: &Keys,
        max_worker_id: u32,
        token: &Token,
        (lease, ttl_secs): (i64, i64),
    ) -> Result<(Grant, i64)> {
        let mirror = self.mirror(namespace, keys, max_worker_id);
        let mut rounds = 0;
        while rounds < ROUNDS {
            // A lost round marks its candidates held in the mirror, so the
            // next round picks others; every fourth lost round reads etcd
            // afresh in case the mirror lags.
            let trust_mirror = mirror.watching() && rounds % 4 != 3;
            // One candidate while nothing was lost yet: a transaction of
            // five operations rather than forty, and acquirers start from
            // random points, so they seldom meet; more after a lost round.
            let wanted = if rounds == 0 {
                FIRST_CANDIDATES
            } else {
                self.inner.candidates
            };
            let mut candidates = if trust_mirror {
                mirror.candidates(wanted)
            } else {
                Vec::new()
            };
            if candidates.is_empty() {
                candidates = self.candidates_from_etcd(keys, &mirror).await?;
                if candidates.is_empty() {
                    return Err(Error::NoAvailableId { max_worker_id });
                }
            }
            // Sent again after a lost answer, the transaction first looks for
            // the grant its first sending may have made (see `acquire_txn`).
            // Counted here, not by the cluster's `retried`, which is also set
            // when no endpoint could be reached before the first sending.
            let mut sendings = 0;
            let config_known = mirror.config_confirmed();
            let max = (!config_known).then_some(max_worker_id);
            let answer = self
                .inner
                .cluster
                .call("acquire", |mut c| {
                    let txn = acquire_txn(
                        keys,
                        max,
                        token,
                        (lease, ttl_secs),
                        &candidates,
                        sendings > 0,
                    );
                    sendings += 1;
                    async move { c.txn(txn).await }
                })
                .await?
                .value;
            let resent = sendings > 1;
            let acquired = parse_acquire(&answer, max_worker_id, &candidates, resent)?;
            if matches!(acquired, Acquired::Won { .. } | Acquired::AllTaken) {
                mirror.confirm_config();
            }
            match acquired {
                Acquired::Won { id, fence, mark } => {
                    mirror.mark_held(id);
                    let grant = Grant {
                        id: WorkerId::from(id),
                        fence,
                        previous_watermark: mark,
                    };
                    return Ok((grant, lease));
                }
                Acquired::AllTaken => {
                    mirror.mark_taken(&candidates);
                    rounds += 1;
                }
                Acquired::NoConfig => self.init_config(keys, max_worker_id).await?,
                Acquired::Mismatch(stored) => {
                    return Err(Error::ConfigMismatch {
                        namespace: namespace.to_string(),
                        stored,
                        requested: max_worker_id,
                    })
                }
            }
        }
        Err(Error::unavailable(
            "etcd",
            format!("acquire lost {ROUNDS} races in a row to other acquirers; try again"),
        ))
    }

    /// Records the pool size of a namespace used for the first time.
    async fn init_config(&self, keys: &Keys, max_worker_id: u32) -> Result<()> {
        let txn = Txn::new()
            .when([Compare::create_revision(keys.config(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(keys.config(), max_worker_id.to_string(), None)]);
        self.txn("create namespace", txn).await.map(|_| ())
    }

    /// Moves the keys of the lease `token` holds on `id` to a new etcd lease
    /// of `ttl`, raising the watermark to at least `watermark`; returns the
    /// new lease.
    ///
    /// The `ownership/` record, whose ttl an expiry's quarantine lasts, gets
    /// the new ttl or `known_secs` (the ttl this process last held the lease
    /// for), whichever is longer: a renew to a shorter ttl whose answer is
    /// lost leaves its holder counting on the longer one.
    ///
    /// # Errors
    /// The contract's refusals for renew; `Unavailable`.
    async fn reattach(
        &self,
        keys: &Keys,
        id: WorkerId,
        token: &Token,
        (ttl, known_secs): (Duration, i64),
        watermark: u64,
    ) -> Result<i64> {
        let n = id.get();
        let (lease, secs) = self.grant(ttl).await?;
        let with_lease = Some(PutOptions::new().with_lease(lease));
        let record = Ownership::held(secs.max(known_secs)).encode();
        let mut then = vec![
            TxnOp::put(keys.owner(n), token.to_string(), with_lease),
            TxnOp::put(keys.ownership(n), record, None),
        ];
        then.extend(raise_mark(keys, n, watermark));
        let answer = self
            .txn("renew", guarded(keys, n, token, then))
            .await?
            .value;
        if answer.succeeded() {
            return Ok(lease);
        }
        self.revoke_later(lease);
        Err(refusal("renew", &answer, token, id)?)
    }

    /// A spare lease of `ttl_secs` if a fresh one is ready, with the instant
    /// it was granted or last extended; asks for another in the background.
    fn spare_lease(&self, ttl_secs: i64) -> Option<(i64, Instant)> {
        let mut stale = Vec::new();
        let (lease, refill) = self.inner.spares.take(ttl_secs, &mut stale);
        for old in stale {
            self.revoke_later(old);
        }
        if refill {
            let store = self.clone();
            tokio::spawn(async move {
                let sent = Instant::now();
                let ttl = Duration::from_secs(ttl_secs.unsigned_abs());
                match store.grant(ttl).await {
                    Ok((lease, _)) => store.inner.spares.put(ttl_secs, lease, sent),
                    Err(_) => store.inner.spares.gave_up(ttl_secs),
                }
            });
        }
        lease
    }

    fn remember(&self, namespace: &Namespace, id: WorkerId, held: HeldLease) -> Option<HeldLease> {
        lock(&self.inner.held).insert((namespace.to_string(), id.get()), held)
    }

    fn forget(&self, namespace: &Namespace, id: WorkerId, token: &Token) -> Option<HeldLease> {
        let mut held = lock(&self.inner.held);
        let key = (namespace.to_string(), id.get());
        match held.get(&key) {
            Some(h) if h.token == *token => held.remove(&key),
            _ => None,
        }
    }

    fn recall(&self, namespace: &Namespace, id: WorkerId, token: &Token) -> Option<HeldLease> {
        lock(&self.inner.held)
            .get(&(namespace.to_string(), id.get()))
            .filter(|h| h.token == *token)
            .cloned()
    }
}

#[async_trait]
impl LeaseStore for EtcdStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            min_ttl: self.inner.min_ttl,
            ttl_granularity: Duration::from_secs(1),
            durable: true,
            // The leader's lessor looks for expired leases every 500 ms, then
            // commits each revocation through Raft (1 s); and every lease is
            // granted for LEASE_SLACK more than its ttl.
            expiry_lag: Duration::from_secs(1) + LEASE_SLACK,
            // See the crate docs: an expired ID waits one more ttl.
            quarantine: true,
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
    ) -> Result<Grant> {
        let started = Instant::now();
        let keys = Keys::new(&self.inner.prefix, namespace);
        let secs = ttl_secs(ttl);
        // A spare granted (or last extended) less than LEASE_SLACK ago still
        // has a whole ttl left: the transaction alone. An older one is
        // extended by a keep-alive sent with the transaction. Either way
        // `extended` is an instant from which the lease covers a whole ttl.
        let (lease, keep_alive, extended_at) = match self.spare_lease(secs) {
            Some((lease, sent)) if sent.elapsed() < LEASE_SLACK => (lease, false, sent),
            Some((lease, _)) => (lease, true, started),
            None => (self.grant(ttl).await?.0, false, started),
        };
        let taking = self.take(namespace, &keys, max_worker_id, token, (lease, secs));
        let (taken, extended) = if keep_alive {
            // The keep-alive brings the spare lease's end to at least now + ttl.
            let (taken, alive) = tokio::join!(taking, self.keep_alive(lease));
            (taken, matches!(alive, Ok(true)))
        } else {
            (taking.await, true)
        };
        let (grant, mut used) = match taken {
            Ok(taken) => taken,
            Err(e) => {
                self.revoke_later(lease);
                return Err(e);
            }
        };
        if used == lease && !extended {
            // The grant rides on a lease that may end before now + ttl: move
            // it to a new one before answering.
            used = self
                .reattach(&keys, grant.id, token, (ttl, secs), 0)
                .await?;
        }
        if used != lease {
            self.revoke_later(lease);
        }
        let held = HeldLease {
            token: *token,
            lease: used,
            ttl_secs: secs,
            // A lease moved by `reattach` was granted after `started`.
            extended: if used == lease { extended_at } else { started },
        };
        if let Some(old) = self.remember(namespace, grant.id, held) {
            if old.lease != used {
                self.revoke_later(old.lease);
            }
        }
        Ok(grant)
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        let keys = Keys::new(&self.inner.prefix, namespace);
        let n = id.get();
        let secs = ttl_secs(ttl);
        match self.recall(namespace, id, token) {
            // Same ttl as the etcd lease: a keep-alive and the guarded
            // transaction (which raises the watermark) go out together, the
            // transaction first: it is the longer of the two (a Raft write
            // when it raises the mark), so sending it first ends the pair
            // sooner.
            Some(mut held) if held.ttl_secs == secs => {
                let started = Instant::now();
                let then = raise_mark(&keys, n, watermark).into_iter().collect();
                let txn = guarded(&keys, n, token, then);
                let (answer, alive) =
                    tokio::join!(self.txn("renew", txn), self.keep_alive(held.lease));
                let answer = answer?.value;
                if !answer.succeeded() {
                    self.forget(namespace, id, token);
                    return Err(refusal("renew", &answer, token, id)?);
                }
                if alive? {
                    held.extended = started;
                    self.remember(namespace, id, held);
                    Ok(())
                } else {
                    self.forget(namespace, id, token);
                    Err(Error::TokenExpired { id })
                }
            }
            // Another ttl, or a lease acquired elsewhere: move the keys to a
            // new etcd lease of the new ttl.
            known => {
                let started = Instant::now();
                let known_secs = known.as_ref().map_or(0, |k| k.ttl_secs);
                let lease = match self
                    .reattach(&keys, id, token, (ttl, known_secs), watermark)
                    .await
                {
                    Ok(lease) => lease,
                    Err(e) => {
                        if e.is_lease_lost() {
                            self.forget(namespace, id, token);
                        }
                        return Err(e);
                    }
                };
                let held = HeldLease {
                    token: *token,
                    lease,
                    ttl_secs: secs,
                    extended: started,
                };
                self.remember(namespace, id, held);
                if let Some(old) = known {
                    self.revoke_later(old.lease);
                }
                Ok(())
            }
        }
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        let keys = Keys::new(&self.inner.prefix, namespace);
        let n = id.get();
        // Deleting `ownership/` is the release's mark: a watch of deletions
        // sees it in the same answer as the owner's deletion (see keys.rs).
        let mut then = vec![
            TxnOp::delete(keys.owner(n), Some(DeleteOptions::new().with_prev_key())),
            TxnOp::delete(keys.ownership(n), None),
        ];
        then.extend(raise_mark(&keys, n, watermark));
        let answer = self.txn("release", guarded(&keys, n, token, then)).await?;
        let retried = answer.retried;
        let answer = answer.value;
        let held = self.forget(namespace, id, token);
        if answer.succeeded() {
            let lease = match answer.op_responses().first() {
                Some(TxnOpResponse::Delete(d)) => d.prev_kvs().first().map(|kv| kv.lease()),
                _ => None,
            };
            if let Some(lease) = lease.filter(|l| *l != 0) {
                // No key rides on it any more: the next acquire can use it.
                let kept = held.is_some_and(|h| {
                    h.lease == lease && self.inner.spares.give_back(h.ttl_secs, lease, h.extended)
                });
                if !kept {
                    self.revoke_later(lease);
                }
            }
            return Ok(());
        }
        // A release sent again after its answer was lost finds what its
        // first sending did: no owner, the last grant its own, no `held`
        // record (an operator's force release leaves `forced`).
        if retried {
            let responses = answer.op_responses();
            let mine = token.to_string();
            if let (Some(None), Some(Some(holder)), Some(None)) =
                (got(&responses, 0), got(&responses, 1), got(&responses, 2))
            {
                if holder == mine.as_bytes() {
                    return Ok(());
                }
            }
        }
        Err(refusal("release", &answer, token, id)?)
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        self.list_namespace(namespace).await
    }

    async fn list_namespaces(&self) -> Result<Vec<workerid_lease::NamespaceInfo>> {
        self.namespaces().await
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        self.force_release_id(namespace, id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A renew to a shorter ttl keeps the longer one in the `ownership/`
    /// record, which an expiry's quarantine lasts: had the renew's answer
    /// been lost, the holder would still count on the longer one.
    #[tokio::test]
    async fn a_shorter_ttl_keeps_the_longer_one_in_the_record() {
        let store = EtcdStore::connect(workerid_testkit::etcd::shared_endpoints())
            .await
            .expect("connect");
        let namespace = Namespace::new("shorter-ttl").expect("namespace");
        let token = Token::generate();
        let grant = store
            .acquire(&namespace, 3, &token, Duration::from_secs(30))
            .await
            .expect("acquire");
        let keys = Keys::new(crate::keys::DEFAULT_PREFIX, &namespace);
        let record = || async {
            let client = store.client().await.expect("client");
            let answer = client
                .kv_client()
                .get(keys.ownership(grant.id.get()), None)
                .await
                .expect("get");
            let kv = answer.kvs().first().expect("a record").clone();
            Ownership::parse(kv.value())
        };
        assert_eq!(record().await, Some(Ownership::Held { ttl_secs: 30 }));
        for secs in [10, 40] {
            store
                .renew(&namespace, grant.id, &token, Duration::from_secs(secs), 0)
                .await
                .expect("renew");
        }
        assert_eq!(record().await, Some(Ownership::Held { ttl_secs: 40 }));
        store
            .renew(&namespace, grant.id, &token, Duration::from_secs(10), 0)
            .await
            .expect("renew");
        assert_eq!(record().await, Some(Ownership::Held { ttl_secs: 40 }));
    }

    #[test]
    fn ttls_are_whole_seconds_rounded_up() {
        assert_eq!(ttl_secs(Duration::from_secs(2)), 2);
        assert_eq!(ttl_secs(Duration::from_millis(2001)), 3);
        assert_eq!(ttl_secs(Duration::from_millis(1)), 1);
    }
}
