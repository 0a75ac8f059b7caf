//! Acquire on etcd: candidates from the mirror (or etcd itself), taken by a
//! guarded transaction on an etcd lease, with rounds lost to other acquirers
//! retried on fresh candidates.

use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use workerid_core::{Error, Grant, Holder, Namespace, Result, Token, WorkerId};

use crate::keys::{number, Keys};
use crate::lessor::{ttl_secs, LEASE_SLACK};
use crate::mirror::{scan, Candidate, Mirror};
use crate::txn::{acquire_txn, got, got_key, parse_acquire, Acquired};
use crate::{EtcdStore, HeldLease};

/// How many transactions one acquire may lose to other acquirers before it
/// gives up with `Unavailable` (each lost round means other processes got IDs).
const ROUNDS: usize = 32;

/// Candidates in an acquire's first round (later rounds: the store's
/// `candidates`).
const FIRST_CANDIDATES: usize = 1;

impl EtcdStore {
    /// Acquire: an etcd lease (a fresh spare, or a new grant), then the
    /// guarded transaction that takes a free ID with it.
    pub(crate) async fn acquire_id(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
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
        let taking = self.take(
            namespace,
            &keys,
            max_worker_id,
            (token, holder),
            (lease, secs),
        );
        let (taken, extended) = if keep_alive {
            // The keep-alive brings the spare lease's end to at least now + ttl.
            let (taken, alive) = tokio::join!(taking, self.keep_alive(lease));
            (taken, matches!(alive, Ok(true)))
        } else {
            (taking.await, true)
        };
        let (grant, mut used, sent_before) = match taken {
            Ok(taken) => taken,
            Err(e) => {
                self.revoke_later(lease);
                return Err(e);
            }
        };
        if sent_before || (used == lease && !extended) {
            // An earlier acquire's grant, on the lease it was made with, or
            // a grant on a lease that may end before now + ttl: moved to a
            // new one that lasts ttl from now (the one it left is revoked).
            used = match self.reattach(&keys, grant.id, token, (ttl, secs), 0).await {
                Ok(moved) => moved,
                Err(e) => {
                    self.revoke_later(lease);
                    // The grant ended before it could be moved: a renew's
                    // refusal is no answer to an acquire, which sent again
                    // is answered as things then stand.
                    return Err(if e.is_lease_lost() {
                        Error::unavailable(
                            "etcd",
                            format!("the grant ended before its lease was moved: {e}"),
                        )
                    } else {
                        e
                    });
                }
            };
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
        (token, holder): (&Token, &Holder),
        (lease, ttl_secs): (i64, i64),
    ) -> Result<(Grant, i64, bool)> {
        let mirror = self.mirror(namespace, keys, max_worker_id);
        let mut rounds = 0;
        // Whether to look for an earlier acquire's grant to this token: until
        // one is found released.
        let mut find_token = true;
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
            let answer = self
                .inner
                .cluster
                .call("acquire", |mut c| {
                    // The config is compared every time: a namespace can be
                    // removed and made again with another pool size.
                    let txn = acquire_txn(
                        keys,
                        max_worker_id,
                        (token, holder),
                        (lease, ttl_secs),
                        &candidates,
                        (sendings > 0, find_token),
                    );
                    sendings += 1;
                    async move { c.txn(txn).await }
                })
                .await?
                .value;
            let resent = sendings > 1;
            let acquired =
                parse_acquire(&answer, max_worker_id, &candidates, (resent, find_token))?;
            match acquired {
                Acquired::Won { id, fence, mark } => {
                    mirror.mark_held(id);
                    let grant = Grant {
                        id: WorkerId::from(id),
                        fence,
                        previous_watermark: mark,
                    };
                    return Ok((grant, lease, false));
                }
                Acquired::SentBefore { id, lease: earlier } => {
                    match self.granted_before(keys, id, token).await? {
                        Some((fence, mark)) => {
                            let grant = Grant {
                                id: WorkerId::from(id),
                                fence,
                                previous_watermark: mark,
                            };
                            return Ok((grant, earlier, true));
                        }
                        None => find_token = false,
                    }
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

    /// The fence and watermark of the grant of `id` to `token`, if it is
    /// still live: what an acquire sent again answers.
    async fn granted_before(
        &self,
        keys: &Keys,
        id: u32,
        token: &Token,
    ) -> Result<Option<(u64, u64)>> {
        let txn = Txn::new()
            .when([Compare::value(
                keys.owner(id),
                CompareOp::Equal,
                token.to_string(),
            )])
            .and_then([
                TxnOp::get(keys.grant(id), None),
                TxnOp::get(keys.mark(id), None),
            ]);
        let answer = self.txn("acquire", txn).await?.value;
        if !answer.succeeded() {
            return Ok(None);
        }
        let bad = || crate::nonsense("acquire", &answer);
        let responses = answer.op_responses();
        // A grant's fence is the revision that wrote `grant/<id>`.
        let fence = got_key(&responses, 0)
            .flatten()
            .and_then(|kv| u64::try_from(kv.mod_revision()).ok())
            .ok_or_else(bad)?;
        let mark = match got(&responses, 1) {
            Some(None) => 0,
            Some(Some(value)) => number(&value).ok_or_else(bad)?,
            None => return Err(bad()),
        };
        Ok(Some((fence, mark)))
    }

    /// Records the pool size of a namespace used for the first time.
    async fn init_config(&self, keys: &Keys, max_worker_id: u32) -> Result<()> {
        let txn = Txn::new()
            .when([Compare::create_revision(keys.config(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(keys.config(), max_worker_id.to_string(), None)]);
        self.txn("create namespace", txn).await.map(|_| ())
    }
}
