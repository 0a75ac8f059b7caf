//! The lease contract's transactions on etcd, built and read: acquire's
//! candidate branches, the token guard of renew and release, and the
//! refusals their else branches tell.

use etcd_client::{
    Compare, CompareOp, KeyValue, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use workerid_core::{Error, Holder, Result, Token, WorkerId};

use crate::keys::{grant_value, number, refusal as refused, watermark, Keys, Ownership};
use crate::mirror::Candidate;
use crate::nonsense;

impl crate::EtcdStore {
    /// Sends `txn` (again, on another member, when an answer is lost).
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
}

/// The `n`th response of a transaction, if it is a get: its first value.
pub(crate) fn got(responses: &[TxnOpResponse], n: usize) -> Option<Option<Vec<u8>>> {
    got_key(responses, n).map(|kv| kv.map(|kv| kv.value().to_vec()))
}

/// The `n`th response of a transaction, if it is a get: its first key.
pub(crate) fn got_key(responses: &[TxnOpResponse], n: usize) -> Option<Option<&KeyValue>> {
    match responses.get(n) {
        Some(TxnOpResponse::Get(get)) => Some(get.kvs().first()),
        _ => None,
    }
}

/// Raises `mark/<id>` to `value` unless it is higher already (creating it if
/// absent): a value comparison, exact because the values are fixed-width.
/// None for 0, which every mark is at least (an absent one reads as 0): the
/// transaction is spared two comparisons.
pub(crate) fn raise_mark(keys: &Keys, id: u32, value: u64) -> Option<TxnOp> {
    if value == 0 {
        return None;
    }
    let key = keys.mark(id);
    let value = watermark(value);
    let create = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key.clone(), value.clone(), None)]);
    Some(TxnOp::txn(
        Txn::new()
            .when([Compare::value(key.clone(), CompareOp::Less, value.clone())])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::txn(create)]),
    ))
}

/// Sets `mark/<id>` to `value`, a release's final word; None for 0, which
/// leaves the mark as it is.
pub(crate) fn set_mark(keys: &Keys, id: u32, value: u64) -> Option<TxnOp> {
    (value != 0).then(|| TxnOp::put(keys.mark(id), watermark(value), None))
}

/// If `owner/<id>` is held by `token`, `then`; else read the owner and the
/// last grant, to tell which refusal it is.
pub(crate) fn guarded(keys: &Keys, id: u32, token: &Token, then: Vec<TxnOp>) -> Txn {
    Txn::new()
        .when([Compare::value(
            keys.owner(id),
            CompareOp::Equal,
            token.to_string(),
        )])
        .and_then(then)
        .or_else([
            TxnOp::get(keys.owner(id), None),
            TxnOp::get(keys.grant(id), None),
            TxnOp::get(keys.ownership(id), None),
        ])
}

/// The contract's refusal, from the else branch of [`guarded`].
pub(crate) fn refusal(
    what: &str,
    answer: &TxnResponse,
    token: &Token,
    id: WorkerId,
) -> Result<Error> {
    let responses = answer.op_responses();
    match (got(&responses, 0), got(&responses, 1), got(&responses, 2)) {
        (Some(owner), Some(grant), Some(ownership)) => Ok(refused(
            owner.as_deref(),
            grant.as_deref(),
            Ownership::released(ownership.as_deref()),
            token,
            id,
        )),
        _ => Err(nonsense(what, answer)),
    }
}

/// The acquire transaction: if the namespace has the pool size `max`, take
/// the first candidate that has no owner and whose `ownership/` record still
/// has the mod revision the mirror judged free (nested branches; see
/// [`crate::mirror`]); else read the config.
///
/// `resent` is for a transaction sent again after its answer was lost (the
/// first sending may have taken a candidate): before taking anything, it
/// looks for a candidate `token` owns already and, if there is one, reads it
/// and its watermark instead, so a retry never takes a second ID. A value
/// comparison is false on an absent key, so each check is one comparison.
///
/// With `find_token`, it then looks for the `token/` key of an earlier
/// acquire with this token (one whose answer was lost before this call):
/// if there is one it takes nothing and reads it
/// ([`Acquired::SentBefore`]). Each grant writes that key on its lease.
pub(crate) fn acquire_txn(
    keys: &Keys,
    max: u32,
    (token, holder): (&Token, &Holder),
    (lease, ttl_secs): (i64, i64),
    candidates: &[Candidate],
    (resent, find_token): (bool, bool),
) -> Txn {
    let ownership = Ownership::held(ttl_secs).encode();
    let mine = token.to_string();
    let grant = grant_value(token, holder);
    let token_key = keys.token(token);
    let earlier = find_token.then(|| {
        Txn::new()
            .when([Compare::create_revision(
                token_key.clone(),
                CompareOp::Greater,
                0,
            )])
            .and_then([TxnOp::get(token_key.clone(), None)])
    });
    let checks = candidates.iter().filter(|_| resent).map(|c| {
        let id = c.id;
        Txn::new()
            .when([Compare::value(
                keys.owner(id),
                CompareOp::Equal,
                mine.clone(),
            )])
            .and_then([
                TxnOp::get(keys.owner(id), None),
                TxnOp::get(keys.mark(id), None),
            ])
    });
    let takes = candidates.iter().map(|&Candidate { id, record, .. }| {
        Txn::new()
            .when([
                Compare::create_revision(keys.owner(id), CompareOp::Equal, 0),
                Compare::mod_revision(keys.ownership(id), CompareOp::Equal, record),
            ])
            .and_then([
                TxnOp::put(
                    keys.owner(id),
                    mine.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::put(keys.grant(id), grant.clone(), None),
                TxnOp::get(keys.mark(id), None),
                TxnOp::put(keys.ownership(id), ownership.clone(), None),
                TxnOp::put(
                    token_key.clone(),
                    format!("{id:07}"),
                    Some(PutOptions::new().with_lease(lease)),
                ),
            ])
    });
    // Each level's else branch is the next level; the last has none.
    let chain = checks
        .chain(earlier)
        .chain(takes)
        .rev()
        .fold(None, |next, level| {
            Some(match next {
                Some(next) => level.or_else([TxnOp::txn(next)]),
                None => level,
            })
        });
    let config = Compare::value(keys.config(), CompareOp::Equal, max.to_string());
    let mut txn = Txn::new().when([config]);
    if let Some(chain) = chain {
        txn = txn.and_then([TxnOp::txn(chain)]);
    }
    txn.or_else([TxnOp::get(keys.config(), None)])
}

/// What one level of an acquire transaction does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// A resent transaction's check for its first sending's grant.
    Check,
    /// The look for an earlier acquire's `token/` key.
    Token,
    /// The take of a candidate.
    Take,
}

/// What an acquire transaction did.
pub(crate) enum Acquired {
    /// `id` is granted, by this transaction or (resent) by its first sending.
    Won { id: u32, fence: u64, mark: u64 },
    /// An earlier acquire with this token was granted `id`, on etcd lease
    /// `lease`, unless that lease has been released since (the `owner/` key
    /// says).
    SentBefore { id: u32, lease: i64 },
    /// Every candidate was held by someone else, or granted since the
    /// mirror judged it free.
    AllTaken,
    /// The namespace has no config yet.
    NoConfig,
    /// The namespace was created with another pool size.
    Mismatch(u32),
}

/// Reads the answer to [`acquire_txn`] with the same `candidates`,
/// `resent` and `find_token`.
pub(crate) fn parse_acquire(
    answer: &TxnResponse,
    max: u32,
    candidates: &[Candidate],
    (resent, find_token): (bool, bool),
) -> Result<Acquired> {
    let bad = || nonsense("acquire", answer);
    let responses = answer.op_responses();
    if !answer.succeeded() {
        let Some(config) = got(&responses, 0) else {
            return Err(bad());
        };
        let Some(config) = config else {
            return Ok(Acquired::NoConfig);
        };
        let stored: u32 = number(&config).ok_or_else(bad)?;
        // A config equal to `max` passed the comparison: not this branch.
        if stored == max {
            return Err(bad());
        }
        return Ok(Acquired::Mismatch(stored));
    }
    let read_mark = |value: Option<Option<Vec<u8>>>| match value {
        Some(None) => Ok(0),
        Some(Some(value)) => number(&value).ok_or_else(bad),
        None => Err(bad()),
    };
    let mut level = match responses.first() {
        Some(TxnOpResponse::Txn(level)) => level.clone(),
        _ => return Err(bad()),
    };
    // The levels in the order `acquire_txn` nested them: (candidate, what
    // the level is); the token's level has no candidate.
    let checks = candidates
        .iter()
        .filter(|_| resent)
        .map(|c| (c.id, Level::Check));
    let earlier = find_token.then_some((0, Level::Token));
    let takes = candidates.iter().map(|c| (c.id, Level::Take));
    for (id, kind) in checks.chain(earlier).chain(takes) {
        let ops = level.op_responses();
        if level.succeeded() && kind == Level::Token {
            let kv = got_key(&ops, 0).flatten().ok_or_else(bad)?;
            let id = number(kv.value()).ok_or_else(bad)?;
            return Ok(Acquired::SentBefore {
                id,
                lease: kv.lease(),
            });
        }
        let check = kind == Level::Check;
        if level.succeeded() {
            // A first sending's grant: its fence is the revision that created
            // the owner key. This transaction's: its own revision.
            let fence = if check {
                match ops.first() {
                    Some(TxnOpResponse::Get(get)) => {
                        get.kvs().first().map(|kv| kv.create_revision())
                    }
                    _ => None,
                }
            } else {
                answer.header().map(|h| h.revision())
            };
            let fence = fence.and_then(|f| u64::try_from(f).ok()).ok_or_else(bad)?;
            let mark = read_mark(got(&ops, if check { 1 } else { 2 }))?;
            return Ok(Acquired::Won { id, fence, mark });
        }
        level = match ops.first() {
            Some(TxnOpResponse::Txn(next)) => next.clone(),
            None => return Ok(Acquired::AllTaken),
            _ => return Err(bad()),
        };
    }
    Ok(Acquired::AllTaken)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use std::time::Instant;

    use workerid_core::{LeaseStore, Namespace, Token};
    use workerid_testkit::etcd::shared_endpoints;

    use super::*;
    use crate::keys::DEFAULT_PREFIX;
    use crate::EtcdStore;

    async fn store() -> EtcdStore {
        EtcdStore::connect(shared_endpoints())
            .await
            .expect("connect")
    }

    /// The store's etcd client, for raw transactions, and a fresh etcd lease
    /// of 30 s for them to take IDs on.
    async fn raw_client(store: &EtcdStore) -> (etcd_client::KvClient, i64) {
        let client = store.client().await.expect("client");
        let lease = client.lease_client().grant(30, None).await.expect("grant");
        (client.kv_client(), lease.id())
    }

    /// Candidates with no `ownership/` record.
    fn unrecorded(ids: &[u32]) -> Vec<Candidate> {
        ids.iter()
            .map(|&id| Candidate {
                id,
                record: 0,
                as_of: 0,
            })
            .collect()
    }

    fn won(answer: &TxnResponse, candidates: &[Candidate], resent: bool) -> (u32, u64, u64) {
        match parse_acquire(answer, 15, candidates, (resent, false)).expect("an answer") {
            Acquired::Won { id, fence, mark } => (id, fence, mark),
            _ => panic!("no candidate won: {answer:?}"),
        }
    }

    /// The answer to a first sending was lost: the resent transaction finds
    /// that grant and takes no other candidate, even one that is free.
    #[tokio::test]
    async fn a_resent_acquire_finds_its_first_grant_and_takes_nothing_else() {
        let store = store().await;
        let namespace = Namespace::new("resent").expect("namespace");
        let token = Token::generate();
        let ttl = Duration::from_secs(30);
        let grant = store
            .acquire(&namespace, 15, &token, ttl, &Holder::default())
            .await
            .expect("acquire");
        let keys = Keys::new(DEFAULT_PREFIX, &namespace);
        let mine = grant.id.get();
        let free = (mine + 1) % 16;
        let (mut kv, lease) = raw_client(&store).await;
        // The free candidate comes first: a plain resend would take it.
        let candidates = unrecorded(&[free, mine]);

        let resent = acquire_txn(
            &keys,
            15,
            (&token, &Holder::default()),
            (lease, 30),
            &candidates,
            (true, false),
        );
        let answer = kv.txn(resent).await.expect("txn");
        assert_eq!(
            won(&answer, &candidates, true),
            (mine, grant.fence, grant.previous_watermark)
        );
        let other = kv.get(keys.owner(free), None).await.expect("get");
        assert_eq!(other.count(), 0, "a resent acquire took a second ID");

        // Teeth: the same transaction as a first sending takes the free one.
        let plain = acquire_txn(
            &keys,
            15,
            (&token, &Holder::default()),
            (lease, 30),
            &candidates,
            (false, false),
        );
        let answer = kv.txn(plain).await.expect("txn");
        assert_eq!(won(&answer, &candidates, false).0, free);

        // A resent transaction whose first sending took nothing takes a
        // candidate as a first sending does, at its own revision.
        let fresh = Token::generate();
        let candidates = unrecorded(&[(mine + 2) % 16]);
        let resent = acquire_txn(
            &keys,
            15,
            (&fresh, &Holder::default()),
            (lease, 30),
            &candidates,
            (true, false),
        );
        let answer = kv.txn(resent).await.expect("txn");
        let revision = answer.header().expect("header").revision();
        let (id, fence, _) = won(&answer, &candidates, true);
        assert_eq!(
            (id, i64::try_from(fence).ok()),
            (candidates[0].id, Some(revision))
        );
    }

    /// Revokes the etcd lease under `owner/<id>` with a raw client, as a
    /// stalled old leader's late revocation would: the owner goes while its
    /// holder still believes in its lease. Returns the `ownership/` record's
    /// mod revision.
    async fn delete_owner_early(store: &EtcdStore, keys: &Keys, id: u32) -> i64 {
        let client = store.client().await.expect("client");
        let owner = client
            .kv_client()
            .get(keys.owner(id), None)
            .await
            .expect("get");
        let lease = owner.kvs().first().expect("an owner").lease();
        let record = client
            .kv_client()
            .get(keys.ownership(id), None)
            .await
            .expect("get");
        client.lease_client().revoke(lease).await.expect("revoke");
        record.kvs().first().expect("a record").mod_revision()
    }

    /// A grant the mirror did not see (its watch delivers deletions only)
    /// whose owner etcd deleted early: a take that expects no record fails,
    /// however free the ID looks; one that expects the grant's record (a
    /// mirror that saw it expire and served its quarantine) succeeds.
    #[tokio::test]
    async fn a_take_fails_when_the_id_was_granted_since_the_mirror_judged_it() {
        let store = store().await;
        let namespace = Namespace::new("record-guard").expect("namespace");
        let holder = store
            .acquire(
                &namespace,
                15,
                &Token::generate(),
                Duration::from_secs(30),
                &Holder::default(),
            )
            .await
            .expect("acquire");
        let keys = Keys::new(DEFAULT_PREFIX, &namespace);
        let y = holder.id.get();
        let record = delete_owner_early(&store, &keys, y).await;

        let (mut kv, lease) = raw_client(&store).await;
        let token = Token::generate();
        let stale = unrecorded(&[y]);
        let txn = acquire_txn(
            &keys,
            15,
            (&token, &Holder::default()),
            (lease, 30),
            &stale,
            (false, false),
        );
        let answer = kv.txn(txn).await.expect("txn");
        assert!(
            matches!(
                parse_acquire(&answer, 15, &stale, (false, false)),
                Ok(Acquired::AllTaken)
            ),
            "an ID granted since the mirror judged it free was taken: {answer:?}"
        );
        // Teeth: expecting the record that is there, the take succeeds.
        let current = [Candidate {
            id: y,
            record,
            as_of: 0,
        }];
        let txn = acquire_txn(
            &keys,
            15,
            (&token, &Holder::default()),
            (lease, 30),
            &current,
            (false, false),
        );
        let answer = kv.txn(txn).await.expect("txn");
        assert_eq!(won(&answer, &current, false).0, y);
    }

    /// End to end: a store whose mirror watches a pool of two (it holds one
    /// ID) does not grant the other after etcd deletes its owner early, not
    /// even at once, before its watch could deliver the deletion: only after
    /// a quarantine of one ttl, and then the old holder is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_early_deleted_owner_is_granted_again_only_after_its_quarantine() {
        let (a, b) = (store().await, store().await);
        let namespace = Namespace::new("early-deletion").expect("namespace");
        let keys = Keys::new(DEFAULT_PREFIX, &namespace);
        let ttl = a.capabilities().min_ttl.max(Duration::from_secs(2));
        let mine = b
            .acquire(&namespace, 1, &Token::generate(), ttl, &Holder::default())
            .await
            .expect("b acquires");
        let token = Token::generate();
        let theirs = a
            .acquire(&namespace, 1, &token, ttl, &Holder::default())
            .await
            .expect("a acquires");
        assert_ne!(mine.id, theirs.id);

        delete_owner_early(&a, &keys, theirs.id.get()).await;
        let deleted = Instant::now();
        let at_once = b
            .acquire(&namespace, 1, &Token::generate(), ttl, &Holder::default())
            .await;
        assert!(
            matches!(at_once, Err(workerid_core::Error::NoAvailableId { .. })),
            "an ID whose owner was deleted early was granted at once: {at_once:?}"
        );
        let regranted = loop {
            match b
                .acquire(&namespace, 1, &Token::generate(), ttl, &Holder::default())
                .await
            {
                Ok(grant) => break grant,
                Err(workerid_core::Error::NoAvailableId { .. }) => {
                    assert!(deleted.elapsed() < ttl * 5, "never granted again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("acquire: {e}"),
            }
        };
        assert_eq!(regranted.id, theirs.id);
        assert!(
            deleted.elapsed() >= ttl,
            "granted again {:?} after the deletion, before one ttl ({ttl:?})",
            deleted.elapsed()
        );
        assert!(regranted.fence > theirs.fence);
        let renewed = a.renew(&namespace, theirs.id, &token, ttl, 0).await;
        assert!(renewed.is_err(), "the old holder renewed: {renewed:?}");
    }
}
