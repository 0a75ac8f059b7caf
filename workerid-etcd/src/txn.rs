//! The lease contract's transactions on etcd, built and read: acquire's
//! candidate branches, the token guard of renew and release, and the
//! refusals their else branches tell.

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use workerid_core::{Error, Result, Token, WorkerId};

use crate::keys::{number, refusal as refused, watermark, Keys, Ownership};

/// `Unavailable` for an answer a transaction cannot have had.
pub(crate) fn nonsense(what: &str, answer: &impl std::fmt::Debug) -> Error {
    Error::unavailable("etcd", format!("unexpected answer to {what}: {answer:?}"))
}

/// The `n`th response of a transaction, if it is a get: its first value.
pub(crate) fn got(responses: &[TxnOpResponse], n: usize) -> Option<Option<Vec<u8>>> {
    match responses.get(n) {
        Some(TxnOpResponse::Get(get)) => Some(get.kvs().first().map(|kv| kv.value().to_vec())),
        _ => None,
    }
}

/// Raises `mark/<id>` to `value` unless it is higher already (creating it if
/// absent): a value comparison, exact because the values are fixed-width.
pub(crate) fn raise_mark(keys: &Keys, id: u32, value: u64) -> TxnOp {
    let key = keys.mark(id);
    let value = watermark(value);
    let create = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key.clone(), value.clone(), None)]);
    TxnOp::txn(
        Txn::new()
            .when([Compare::value(key.clone(), CompareOp::Less, value.clone())])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::txn(create)]),
    )
}

/// If `owner/<id>` is held by `token`, `then`; else read the owner and the
/// holder, to tell which refusal it is.
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
            TxnOp::get(keys.holder(id), None),
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
        (Some(owner), Some(holder), Some(ownership)) => Ok(refused(
            owner.as_deref(),
            holder.as_deref(),
            Ownership::released(ownership.as_deref()),
            token,
            id,
        )),
        _ => Err(nonsense(what, answer)),
    }
}

/// The acquire transaction: if the namespace has this pool size and the token
/// holds nothing yet, take the first absent candidate (nested branches);
/// else read the config and the token's ID.
pub(crate) fn acquire_txn(
    keys: &Keys,
    max: u32,
    token: &Token,
    (lease, ttl_secs): (i64, i64),
    candidates: &[u32],
) -> Txn {
    let ownership = Ownership::held(ttl_secs).encode();
    let mut chain: Option<Txn> = None;
    for &id in candidates.iter().rev() {
        let with_lease = || Some(PutOptions::new().with_lease(lease));
        let mut level = Txn::new()
            .when([Compare::create_revision(
                keys.owner(id),
                CompareOp::Equal,
                0,
            )])
            .and_then([
                TxnOp::put(keys.owner(id), token.to_string(), with_lease()),
                TxnOp::put(keys.token(token), id.to_string(), with_lease()),
                TxnOp::put(keys.holder(id), token.to_string(), None),
                TxnOp::get(keys.mark(id), None),
                TxnOp::put(keys.ownership(id), ownership.clone(), None),
            ]);
        if let Some(next) = chain.take() {
            level = level.or_else([TxnOp::txn(next)]);
        }
        chain = Some(level);
    }
    let mut txn = Txn::new().when([
        Compare::value(keys.config(), CompareOp::Equal, max.to_string()),
        Compare::create_revision(keys.token(token), CompareOp::Equal, 0),
    ]);
    if let Some(chain) = chain {
        txn = txn.and_then([TxnOp::txn(chain)]);
    }
    txn.or_else([
        TxnOp::get(keys.config(), None),
        TxnOp::get(keys.token(token), None),
    ])
}

pub(crate) enum Acquired {
    Won { id: u32, fence: u64, mark: u64 },
    AllTaken,
    NoConfig,
    Mismatch(u32),
    AlreadyGranted(u32),
}

pub(crate) fn parse_acquire(
    answer: &TxnResponse,
    max: u32,
    candidates: &[u32],
) -> Result<Acquired> {
    let bad = || nonsense("acquire", answer);
    let responses = answer.op_responses();
    if !answer.succeeded() {
        let (Some(config), Some(owned)) = (got(&responses, 0), got(&responses, 1)) else {
            return Err(bad());
        };
        let Some(config) = config else {
            return Ok(Acquired::NoConfig);
        };
        let stored: u32 = number(&config).ok_or_else(bad)?;
        if stored != max {
            return Ok(Acquired::Mismatch(stored));
        }
        return match owned {
            Some(id) => Ok(Acquired::AlreadyGranted(number(&id).ok_or_else(bad)?)),
            None => Err(bad()),
        };
    }
    let fence = answer
        .header()
        .and_then(|h| u64::try_from(h.revision()).ok())
        .ok_or_else(bad)?;
    let mut level = match responses.first() {
        Some(TxnOpResponse::Txn(level)) => level.clone(),
        _ => return Err(bad()),
    };
    for &id in candidates {
        let ops = level.op_responses();
        if level.succeeded() {
            let mark = match got(&ops, 3) {
                Some(None) => 0,
                Some(Some(value)) => number(&value).ok_or_else(bad)?,
                None => return Err(bad()),
            };
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
