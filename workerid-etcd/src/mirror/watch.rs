//! The mirror's etcd side: scans, the watch loop, and the reads that settle
//! unresolved expiries.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use etcd_client::{Event, EventType, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse};
use etcd_client::{WatchFilterType, WatchOptions};

use super::state::{Change, RecordRead, Snapshot};
use super::Mirror;
use crate::cluster::Cluster;
use crate::keys::{Keys, Ownership};

/// How many keys one page of a scan asks for.
const PAGE: i64 = 10_000;

/// How many records one settling read asks for (etcd allows 128 operations
/// in a transaction by default).
const READS: usize = 64;

/// The `ownership/` record `kv` holds, if it is one.
fn record(keys: &Keys, kv: &KeyValue) -> Option<RecordRead> {
    let id = keys.id_of("ownership", kv.key())?;
    let ttl_secs = match Ownership::parse(kv.value()) {
        Some(Ownership::Held { ttl_secs }) => Some(ttl_secs),
        _ => None,
    };
    Some(RecordRead {
        id,
        revision: kv.mod_revision(),
        ttl_secs,
    })
}

/// What one watch event changed.
fn change(keys: &Keys, event: &Event) -> Option<Change> {
    let kv = event.kv()?;
    let (put, revision) = (event.event_type() == EventType::Put, kv.mod_revision());
    if let Some(id) = keys.owner_id(kv.key()) {
        return Some(Change::Owner { id, revision, put });
    }
    if put {
        return record(keys, kv).map(Change::Record);
    }
    let id = keys.id_of("ownership", kv.key())?;
    Some(Change::RecordDeleted { id, revision })
}

/// Reads every `owner/` and `ownership/` key of the namespace (in pages, at
/// one revision).
pub(crate) async fn scan(cluster: &Arc<Cluster>, keys: &Keys) -> workerid_core::Result<Snapshot> {
    let (start, end) = keys.owners_and_ownership();
    let mut from = start.into_bytes();
    let mut revision = 0;
    let mut snapshot = Snapshot::default();
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let start = from.clone();
        let answer = cluster
            .call("scan", |mut c| {
                let (start, options) = (start.clone(), options.clone());
                async move { c.get(start, Some(options)).await }
            })
            .await?
            .value;
        if revision == 0 {
            revision = answer.header().map(|h| h.revision()).unwrap_or(0);
        }
        for kv in answer.kvs() {
            if let Some(id) = keys.owner_id(kv.key()) {
                snapshot.held.push(id);
            } else if let Some(read) = record(keys, kv) {
                snapshot.records.push(read);
            }
        }
        match answer.kvs().last() {
            Some(last) if answer.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    snapshot.revision = revision;
    Ok(snapshot)
}

/// Reads the `ownership/` records of `expired` (IDs whose owner was deleted
/// at the paired revision without a release) and settles them.
async fn resolve(
    mirror: &Mirror,
    cluster: &Arc<Cluster>,
    expired: &[(u32, i64)],
) -> workerid_core::Result<()> {
    for chunk in expired.chunks(READS) {
        let reads: Vec<TxnOp> = chunk
            .iter()
            .map(|&(id, _)| TxnOp::get(mirror.keys.ownership(id), None))
            .collect();
        let answer = cluster
            .call("ownership read", |mut c| {
                let txn = Txn::new().and_then(reads.clone());
                async move { c.txn(txn).await }
            })
            .await?
            .value;
        let responses = answer.op_responses();
        if responses.len() != chunk.len() {
            return Err(crate::nonsense("ownership read", &answer));
        }
        let mut state = mirror.state();
        for (&(id, deleted), response) in chunk.iter().zip(&responses) {
            let TxnOpResponse::Get(get) = response else {
                return Err(crate::nonsense("ownership read", &answer));
            };
            let read = get.kvs().first().and_then(|kv| record(&mirror.keys, kv));
            state.settle(id, deleted, read);
        }
    }
    Ok(())
}

/// The watch loop: (re)loads when needed, then applies every deletion; on
/// any failure it moves to another endpoint and starts over from the last
/// revision it saw (or, when an expiry could not be settled, from a fresh
/// scan). Ends when the mirror is dropped.
pub(crate) async fn follow(mirror: Weak<Mirror>, cluster: Arc<Cluster>) {
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(m) = mirror.upgrade() else { return };
        if m.state().revision == 0 {
            if let Ok(snapshot) = scan(&cluster, &m.keys).await {
                m.install(&snapshot);
            }
        }
        let start = m.state().revision + 1;
        let (from, end) = m.keys.owners_and_ownership();
        drop(m);
        if start > 1 {
            if let Ok((index, client)) = cluster.current().await {
                let options = WatchOptions::new()
                    .with_range(end)
                    .with_start_revision(start)
                    .with_filters([WatchFilterType::NoPut]);
                match client.watch_client().watch(from, Some(options)).await {
                    Ok((_watcher, mut stream)) => {
                        if let Some(m) = mirror.upgrade() {
                            m.state().watching = true;
                        }
                        pause = Duration::from_millis(50);
                        loop {
                            let message = stream.message().await;
                            let Some(m) = mirror.upgrade() else { return };
                            match message {
                                Ok(Some(answer)) if answer.canceled() => {
                                    // Compacted past our revision: load afresh.
                                    tracing::debug!(
                                        "etcd watch canceled: {}",
                                        answer.cancel_reason()
                                    );
                                    m.state().revision = 0;
                                    break;
                                }
                                Ok(Some(answer)) => {
                                    let revision = answer
                                        .events()
                                        .iter()
                                        .filter_map(|e| e.kv().map(|kv| kv.mod_revision()))
                                        .max()
                                        .unwrap_or(0);
                                    let changes: Vec<Change> = answer
                                        .events()
                                        .iter()
                                        .filter_map(|e| change(&m.keys, e))
                                        .collect();
                                    let expired =
                                        m.state().apply(&changes, revision, Instant::now());
                                    if let Err(e) = resolve(&m, &cluster, &expired).await {
                                        // Unsettled expiries stay out of the
                                        // candidates until a scan settles them.
                                        tracing::debug!("settling etcd expiries: {e}");
                                        m.state().revision = 0;
                                        cluster.failed(index);
                                        break;
                                    }
                                }
                                Ok(None) | Err(_) => {
                                    cluster.failed(index);
                                    break;
                                }
                            }
                        }
                    }
                    Err(e) => {
                        tracing::debug!("etcd watch failed: {e}");
                        cluster.failed(index);
                    }
                }
            }
        }
        if let Some(m) = mirror.upgrade() {
            m.state().watching = false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}
