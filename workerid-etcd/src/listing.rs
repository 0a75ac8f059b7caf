//! The operator's methods: list a namespace (one transaction of range reads,
//! at one revision), force a release and remove a namespace (one guarded
//! transaction each).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse};
use workerid_core::{
    Error, LeaseInfo, LeaseState, Listing, Namespace, NamespaceInfo, Result, WorkerId,
};

use crate::keys::{grant_holder, grant_token, number, Keys, Ownership};
use crate::txn::{got, got_key};
use crate::{lock, nonsense, EtcdStore};

/// How many times a force release reads the owner again when it changed.
const FORCE_ATTEMPTS: usize = 8;

/// The kinds of keys a listing reads, in the order of the transaction.
const KINDS: [&str; 4] = ["owner", "grant", "mark", "ownership"];

impl EtcdStore {
    /// Every namespace, from one range read of every namespace's keys: the
    /// pool size from `config`, and as live the IDs whose `owner/` key (on
    /// an etcd lease, deleted when it expires) holds the token of their last
    /// grant (`grant/`).
    pub(crate) async fn namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        let start = format!("{}/ns/", self.inner.prefix);
        let answer = self
            .inner
            .cluster
            .call("list_namespaces", |mut client| {
                let start = start.clone();
                async move {
                    client
                        .get(start, Some(GetOptions::new().with_prefix()))
                        .await
                }
            })
            .await?
            .value;
        let bad = || nonsense("list_namespaces", &answer);
        // Per namespace: its pool size, and per ID the owner's and the last
        // grant's token.
        type Tokens<'a> = HashMap<&'a str, (Option<&'a [u8]>, Option<&'a [u8]>)>;
        let mut found: BTreeMap<&str, (Option<u32>, Tokens<'_>)> = BTreeMap::new();
        for kv in answer.kvs() {
            let Some(rest) = std::str::from_utf8(kv.key())
                .ok()
                .and_then(|key| key.strip_prefix(&start))
            else {
                continue;
            };
            let Some((name, what)) = rest.split_once('/') else {
                continue;
            };
            let (max, tokens) = found.entry(name).or_default();
            match what.split_once('/') {
                None if what == "config" => *max = Some(number(kv.value()).ok_or_else(bad)?),
                Some(("owner", id)) => tokens.entry(id).or_default().0 = Some(kv.value()),
                Some(("grant", id)) => {
                    tokens.entry(id).or_default().1 = Some(grant_token(kv.value()))
                }
                _ => {}
            }
        }
        let mut all = Vec::with_capacity(found.len());
        for (name, (max, tokens)) in found {
            let (Some(max_worker_id), Ok(namespace)) = (max, Namespace::new(name)) else {
                continue;
            };
            let live = tokens
                .values()
                .filter(|(owner, granted)| owner.is_some() && owner == granted)
                .count();
            all.push(NamespaceInfo {
                namespace,
                max_worker_id,
                live: u32::try_from(live).unwrap_or(u32::MAX),
            });
        }
        Ok(all)
    }

    pub(crate) async fn list_namespace(&self, namespace: &Namespace) -> Result<Listing> {
        let keys = Keys::new(&self.inner.prefix, namespace);
        let mut reads = vec![TxnOp::get(keys.config(), None)];
        reads.extend(
            KINDS
                .iter()
                .map(|kind| TxnOp::get(keys.all(kind), Some(GetOptions::new().with_prefix()))),
        );
        let answer = self.txn("list", Txn::new().and_then(reads)).await?.value;
        let responses = answer.op_responses();
        let bad = || nonsense("list", &answer);
        let mut ranges = Vec::with_capacity(5);
        for response in &responses {
            match response {
                TxnOpResponse::Get(get) => ranges.push(get.kvs()),
                _ => return Err(bad()),
            }
        }
        let [config, owners, grants, marks, ownership] = ranges.as_slice() else {
            return Err(bad());
        };
        let Some(config) = config.first() else {
            return Ok(Listing::unknown());
        };
        let max_worker_id: u32 = number(config.value()).ok_or_else(bad)?;
        let by_id = |kind: &str, kvs: &[etcd_client::KeyValue]| {
            kvs.iter()
                .filter_map(|kv| Some((keys.id_of(kind, kv.key())?, kv.clone())))
                .collect::<HashMap<u32, etcd_client::KeyValue>>()
        };
        let owners = by_id("owner", owners);
        let marks = by_id("mark", marks);
        // A release deletes `ownership/<id>`: the IDs not released are
        // those whose record is there and says otherwise.
        let not_released: HashSet<u32> = by_id("ownership", ownership)
            .into_iter()
            .filter(|(_, kv)| !Ownership::released(Some(kv.value())))
            .map(|(id, _)| id)
            .collect();
        let grants: BTreeMap<u32, etcd_client::KeyValue> =
            by_id("grant", grants).into_iter().collect();

        let mut leases = Vec::with_capacity(grants.len());
        for (id, grant) in grants {
            let live = owners
                .get(&id)
                .filter(|owner| owner.value() == grant_token(grant.value()));
            let state = match live {
                Some(owner) => match self.time_left(owner.lease()).await? {
                    Some(remaining) => LeaseState::Live { remaining },
                    None => LeaseState::Expired,
                },
                None if not_released.contains(&id) => LeaseState::Expired,
                None => LeaseState::Free,
            };
            let watermark = match marks.get(&id) {
                Some(kv) => number(kv.value()).ok_or_else(bad)?,
                None => 0,
            };
            leases.push(LeaseInfo {
                id: WorkerId::from(id),
                state,
                fence: u64::try_from(grant.mod_revision()).map_err(|_| bad())?,
                watermark,
                holder: grant_holder(grant.value()).ok_or_else(bad)?,
            });
        }
        Ok(Listing {
            max_worker_id: Some(max_worker_id),
            leases,
        })
    }

    /// The time an etcd lease has left (whole seconds, as etcd counts), or
    /// None once it has run out.
    async fn time_left(&self, lease: i64) -> Result<Option<Duration>> {
        let answer = self
            .inner
            .cluster
            .call("lease time to live", |mut c| async move {
                c.lease_time_to_live(lease, None).await
            })
            .await?
            .value;
        Ok(u64::try_from(answer.ttl())
            .ok()
            .filter(|secs| *secs > 0)
            .map(Duration::from_secs))
    }

    /// Deletes every key of `namespace` in one transaction guarded by "no
    /// `owner/` key": an owner key lives exactly as long as its etcd lease.
    pub(crate) async fn remove_namespace_keys(&self, namespace: &Namespace) -> Result<bool> {
        let keys = Keys::new(&self.inner.prefix, namespace);
        let txn = Txn::new()
            .when([Compare::create_revision(keys.owners(), CompareOp::Equal, 0).with_prefix()])
            .and_then([TxnOp::delete(
                keys.namespace(),
                Some(DeleteOptions::new().with_prefix()),
            )])
            .or_else([TxnOp::get(
                keys.owners(),
                Some(GetOptions::new().with_prefix().with_count_only()),
            )]);
        let answer = self.txn("remove namespace", txn).await?;
        let (retried, answer) = (answer.retried, answer.value);
        let responses = answer.op_responses();
        match responses.first() {
            Some(TxnOpResponse::Delete(deleted)) if answer.succeeded() => {
                lock(&self.inner.mirrors).remove_namespace(namespace.as_str());
                // Sent again after a lost answer, the first sending may have
                // deleted everything.
                Ok(deleted.deleted() > 0 || retried)
            }
            Some(TxnOpResponse::Get(owners)) if !answer.succeeded() => Err(Error::NamespaceInUse {
                namespace: namespace.to_string(),
                live: u32::try_from(owners.count()).unwrap_or(u32::MAX),
            }),
            _ => Err(nonsense("remove namespace", &answer)),
        }
    }

    /// Releases `id` for an operator: a transaction guarded by the owner's
    /// revision records in `ownership/` the etcd lease the `owner/` key rides
    /// on, then that lease is revoked, which deletes the owner key. The owner
    /// stays until its lease is gone, so a call that fails midway leaves the
    /// holder both its key and its keep-alive (a renewal may be a keep-alive
    /// alone, see `lease.rs`), never one without the other; the mirrors read
    /// the record when the owner key goes, and offer the ID at once. A call
    /// that finds the ID already force released revokes the recorded lease
    /// again, in case the call that released it could not.
    pub(crate) async fn force_release_id(
        &self,
        namespace: &Namespace,
        id: WorkerId,
    ) -> Result<bool> {
        let keys = Keys::new(&self.inner.prefix, namespace);
        let n = id.get();
        // The holder's token, once a lease of it was revoked: the owner key
        // may have moved to a new etcd lease meanwhile (a renewal with
        // another ttl), and is then forced again; another token's owner is a
        // later grant, left alone.
        let mut forced: Option<Vec<u8>> = None;
        for _ in 0..FORCE_ATTEMPTS {
            let read = Txn::new().and_then([
                TxnOp::get(keys.owner(n), None),
                TxnOp::get(keys.ownership(n), None),
            ]);
            let read = self.txn("force release", read).await?.value;
            let responses = read.op_responses();
            let (Some(owner), Some(ownership)) = (got_key(&responses, 0), got(&responses, 1))
            else {
                return Err(nonsense("force release", &read));
            };
            let owner = owner.filter(|o| forced.as_deref().is_none_or(|t| t == o.value()));
            let Some((lease, revision, token)) =
                owner.map(|kv| (kv.lease(), kv.mod_revision(), kv.value().to_vec()))
            else {
                if forced.is_some() {
                    return Ok(true);
                }
                if let Some(Ownership::Forced { lease }) =
                    ownership.and_then(|o| Ownership::parse(&o))
                {
                    self.revoke_now(lease).await?;
                }
                return Ok(false);
            };
            let mark = Txn::new()
                .when([Compare::mod_revision(
                    keys.owner(n),
                    CompareOp::Equal,
                    revision,
                )])
                .and_then([TxnOp::put(
                    keys.ownership(n),
                    Ownership::Forced { lease }.encode(),
                    None,
                )]);
            // Sent again after a lost answer, the comparison still holds:
            // the record is not the owner key.
            if self.txn("force release", mark).await?.value.succeeded() {
                self.revoke_now(lease).await?;
                forced = Some(token);
            }
        }
        Err(Error::unavailable(
            "etcd",
            format!("force release of {id}: its owner changed {FORCE_ATTEMPTS} times meanwhile"),
        ))
    }
}
