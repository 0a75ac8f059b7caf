//! The lease contract on etcd: renew and release as guarded transactions
//! (acquire is in `acquire.rs`), and the operator's methods.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use workerid_core::{
    Capabilities, Error, Grant, Holder, LeaseStore, Listing, Namespace, Result, Token, WorkerId,
};

use crate::keys::{grant_token, Keys};
use crate::lessor::{ttl_secs, LEASE_SLACK};
use crate::txn::{got, got_key, guarded, raise_mark, refusal, set_mark};
use crate::{EtcdStore, HeldLease};

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
        holder: &Holder,
    ) -> Result<Grant> {
        self.acquire_id(namespace, max_worker_id, token, ttl, holder)
            .await
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
            // Same ttl, no mark to raise, and a cluster of one member: the
            // keep-alive alone. The owner key rides on the etcd lease, and a
            // force release revokes that lease before it answers, so the
            // keep-alive fails whenever the transaction would; with more
            // members, a stale leader could still answer it (see leader.rs).
            Some(held)
                if held.ttl_secs == secs && watermark == 0 && self.inner.cluster.lone_member() =>
            {
                let started = Instant::now();
                if self.keep_alive(held.lease).await? {
                    return self.renewed((namespace, id, token), (held, started), None, Ok(true));
                }
                // The lease is gone: the keys tell which refusal it is, or
                // that another handle moved them to a lease of its own.
                let txn = guarded(&keys, n, token, Vec::new());
                let answer = self.txn("renew", txn).await?.value;
                if answer.succeeded() {
                    return self
                        .move_keys(namespace, &keys, id, token, ttl, Some(held), watermark)
                        .await;
                }
                self.renewed(
                    (namespace, id, token),
                    (held, started),
                    Some(answer),
                    Ok(false),
                )
            }
            // Same ttl as the etcd lease: a keep-alive and the guarded
            // transaction (which raises the watermark) go out together, the
            // transaction first: it is the longer of the two (a Raft write
            // when it raises the mark), so sending it first ends the pair
            // sooner.
            Some(held) if held.ttl_secs == secs => {
                let started = Instant::now();
                let then = raise_mark(&keys, n, watermark).into_iter().collect();
                let txn = guarded(&keys, n, token, then);
                let (answer, alive) =
                    tokio::join!(self.txn("renew", txn), self.keep_alive(held.lease));
                let answer = answer?.value;
                if answer.succeeded() && matches!(alive, Ok(false)) {
                    // Still this token's, on a lease another handle moved
                    // the keys to.
                    return self
                        .move_keys(namespace, &keys, id, token, ttl, Some(held), watermark)
                        .await;
                }
                self.renewed((namespace, id, token), (held, started), Some(answer), alive)
            }
            // Another ttl, or a lease acquired elsewhere: move the keys to a
            // new etcd lease of the new ttl.
            known => {
                self.move_keys(namespace, &keys, id, token, ttl, known, watermark)
                    .await
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
        then.extend(set_mark(&keys, n, watermark));
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
                let ours = held.filter(|h| h.lease == lease);
                let kept = ours
                    .as_ref()
                    .is_some_and(|h| self.inner.spares.give_back(h.ttl_secs, lease, h.extended));
                if ours.is_none() {
                    // Another handle may renew it by keep-alive alone: it
                    // must fail from now on.
                    if let Err(e) = self.revoke_now(lease).await {
                        tracing::warn!("etcd: revoking the released lease {lease:x}: {e}");
                    }
                } else if !kept {
                    self.revoke_later(lease);
                }
            }
            return Ok(());
        }
        // A release sent again after its answer was lost finds what its
        // first sending did: no owner, the last grant its own, no `held`
        // record (an operator's force release leaves `forced`); or, when
        // another token was granted the freed ID in between, the same just
        // before that grant.
        if retried {
            let responses = answer.op_responses();
            if freed_by(&responses, token) {
                return Ok(());
            }
            if let Some(Some(grant)) = got_key(&responses, 1) {
                if grant_token(grant.value()) != token.to_string().as_bytes()
                    && self
                        .freed_before(&keys, n, token, grant.mod_revision())
                        .await?
                {
                    return Ok(());
                }
            }
        }
        Err(refusal("release", &answer, token, id)?)
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        self.list_namespace(namespace).await
    }

    async fn list_namespaces(&self) -> Result<Vec<workerid_core::NamespaceInfo>> {
        self.namespaces().await
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        self.force_release_id(namespace, id).await
    }

    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        self.remove_namespace_keys(namespace).await
    }
}

impl EtcdStore {
    /// How a renewal on the holder's etcd lease ended, from the guarded
    /// transaction's answer (None: none was sent) and the keep-alive's:
    /// refused as the transaction tells, expired with the etcd lease, or
    /// renewed from `started` (remembered for the next renewal).
    fn renewed(
        &self,
        (namespace, id, token): (&Namespace, WorkerId, &Token),
        (mut held, started): (HeldLease, Instant),
        answer: Option<TxnResponse>,
        alive: Result<bool>,
    ) -> Result<()> {
        if let Some(answer) = answer.filter(|a| !a.succeeded()) {
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
}

impl EtcdStore {
    /// Renews the lease `token` holds on `id` by moving its keys to a new
    /// etcd lease of `ttl` (see [`reattach`](EtcdStore::reattach)), and
    /// keeps that lease as this handle's, in place of `known`.
    ///
    /// # Errors
    /// The contract's refusals for renew; `Unavailable`.
    #[allow(clippy::too_many_arguments)]
    async fn move_keys(
        &self,
        namespace: &Namespace,
        keys: &Keys,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        known: Option<HeldLease>,
        watermark: u64,
    ) -> Result<()> {
        let started = Instant::now();
        let known_secs = known.as_ref().map_or(0, |k| k.ttl_secs);
        let lease = match self
            .reattach(keys, id, token, (ttl, known_secs), watermark)
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
            ttl_secs: ttl_secs(ttl),
            extended: started,
        };
        self.remember(namespace, id, held);
        if let Some(old) = known {
            self.revoke_later(old.lease);
        }
        Ok(())
    }

    /// Whether a release by `token` freed `id` before the grant written at
    /// `revision` (the ID's current one, to another token): read as of the
    /// revision before it (see [`freed_by`]). Only the last grant is
    /// looked behind: an ID granted twice since the release answers no,
    /// and the release is refused as the ID stands now.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the read fails, a revision etcd compacted
    /// away included: whether the release took effect is then unknown.
    async fn freed_before(
        &self,
        keys: &Keys,
        id: u32,
        token: &Token,
        revision: i64,
    ) -> Result<bool> {
        let before = || Some(GetOptions::new().with_revision(revision - 1));
        let read = Txn::new().and_then([
            TxnOp::get(keys.owner(id), before()),
            TxnOp::get(keys.grant(id), before()),
            TxnOp::get(keys.ownership(id), before()),
        ]);
        let answer = self
            .txn("release (reading the ID before its next grant)", read)
            .await?;
        Ok(freed_by(&answer.value.op_responses(), token))
    }
}

/// Whether `responses` (`owner/`, `grant/` and `ownership/` of an ID, as
/// [`guarded`]'s else branch reads them) show the ID freed by a release of
/// `token`: no owner, the last grant `token`'s, and no `ownership/` record.
/// A release deletes that record; an expiry leaves it, and an operator's
/// force release rewrites it `forced`.
fn freed_by(responses: &[TxnOpResponse], token: &Token) -> bool {
    match (got(responses, 0), got(responses, 1), got(responses, 2)) {
        (Some(None), Some(Some(grant)), Some(None)) => {
            grant_token(&grant) == token.to_string().as_bytes()
        }
        _ => false,
    }
}
