//! The leases this process holds: which etcd lease each worker ID's keys
//! ride on, and moving them to a new one when the ttl changes.

use std::time::Duration;

use etcd_client::{PutOptions, TxnOp, TxnOpResponse};
use workerid_core::{Namespace, Result, Token, WorkerId};

use crate::keys::{Keys, Ownership};
use crate::txn::{guarded, raise_mark, refusal};
use crate::{lock, EtcdStore, HeldLease};

impl EtcdStore {
    /// Moves the keys of the lease `token` holds on `id` to a new etcd lease
    /// of `ttl`, raising the watermark to at least `watermark`; returns the
    /// new lease.
    ///
    /// The `ownership/` record, whose ttl an expiry's quarantine lasts, gets
    /// the new ttl or `known_secs` (the ttl this process last held the lease
    /// for), whichever is longer: a renew to a shorter ttl whose answer is
    /// lost leaves its holder counting on the longer one.
    ///
    /// The lease the keys rode on is revoked at once when it is not the new
    /// one: another handle (another process, another server behind a load
    /// balancer) may hold it for the same token and renew by keep-alive
    /// alone, which must fail from now on, or it would go on answering for
    /// a lease that this handle may release or let expire.
    ///
    /// # Errors
    /// The contract's refusals for renew; `Unavailable`.
    pub(crate) async fn reattach(
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
            TxnOp::put(
                keys.owner(n),
                token.to_string(),
                Some(PutOptions::new().with_lease(lease).with_prev_key()),
            ),
            TxnOp::put(keys.ownership(n), record, None),
            TxnOp::put(keys.token(token), format!("{n:07}"), with_lease),
        ];
        then.extend(raise_mark(keys, n, watermark));
        let answer = self
            .txn("renew", guarded(keys, n, token, then))
            .await?
            .value;
        if answer.succeeded() {
            let before = match answer.op_responses().first() {
                Some(TxnOpResponse::Put(put)) => put.prev_key().map(|kv| kv.lease()),
                _ => None,
            };
            if let Some(before) = before.filter(|&b| b != 0 && b != lease) {
                if let Err(e) = self.revoke_now(before).await {
                    tracing::warn!("etcd: revoking the lease {before:x} the keys left: {e}");
                    self.revoke_later(before);
                }
            }
            return Ok(lease);
        }
        self.revoke_later(lease);
        Err(refusal("renew", &answer, token, id)?)
    }

    pub(crate) fn remember(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        held: HeldLease,
    ) -> Option<HeldLease> {
        lock(&self.inner.held).insert((namespace.to_string(), id.get()), held)
    }

    pub(crate) fn forget(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
    ) -> Option<HeldLease> {
        let mut held = lock(&self.inner.held);
        let key = (namespace.to_string(), id.get());
        match held.get(&key) {
            Some(h) if h.token == *token => held.remove(&key),
            _ => None,
        }
    }

    pub(crate) fn recall(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
    ) -> Option<HeldLease> {
        lock(&self.inner.held)
            .get(&(namespace.to_string(), id.get()))
            .filter(|h| h.token == *token)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use workerid_core::{Holder, LeaseStore};

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
            .acquire(
                &namespace,
                3,
                &token,
                Duration::from_secs(30),
                &Holder::default(),
            )
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
}
