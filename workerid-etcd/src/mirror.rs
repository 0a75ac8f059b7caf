//! A namespace's held IDs as this process last saw them: a snapshot of the
//! `owner/` keys, kept current by a watch.
//!
//! The mirror only *suggests* candidates to acquire; the guarded transaction
//! decides. A stale mirror costs a lost race (the transaction finds the
//! candidate taken) or a missed free ID, and acquire never answers
//! `NoAvailableId` from the mirror alone: it asks etcd first (see
//! [`EtcdStore::scan`](crate::EtcdStore)). So acquire costs O(1) round trips
//! and no scan while the watch runs, whatever the pool size.
//!
//! # Quarantine
//!
//! The mirror also follows the `ownership/` keys, so it tells an ID that was
//! released (its `ownership/` key says so in the same revision that deleted
//! the owner) from one whose etcd lease ran out. An expired ID is not offered
//! as a candidate until one more of its ttl has passed since this process
//! saw it gone: etcd may delete an owner key early (a stalled old leader's
//! late revocation, or a keep-alive answered by a leader that no longer was
//! one: etcd-io/etcd#15247), but the holder's own deadline is never later
//! than that deletion plus its ttl, so after the quarantine no holder can
//! still believe in it. Every process that sees the ID gone sees it no earlier
//! than the deletion, so each one's quarantine is long enough on its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use etcd_client::{EventType, GetOptions, WatchOptions};
use rand::Rng;
use tokio::task::AbortHandle;

use crate::cluster::Cluster;
use crate::keys::{Keys, Ownership};

/// How many keys one page of a scan asks for.
const PAGE: i64 = 10_000;

/// Added to every quarantine, for the rates of two machines' clocks and the
/// time a holder's answer takes to reach it.
const QUARANTINE_MARGIN: Duration = Duration::from_millis(250);

/// A namespace's owners and ownership records at one revision.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// The IDs whose `owner/` key exists.
    pub held: Vec<u32>,
    /// The IDs whose `ownership/` key says `held`: (ID, ttl in seconds,
    /// the key's mod revision).
    pub granted: Vec<(u32, u32, i64)>,
    pub revision: i64,
}

/// An expired ID's quarantine.
#[derive(Debug, Clone, Copy)]
struct Quarantine {
    until: Instant,
    /// The mod revision of the `ownership/` record of the grant that expired
    /// (a later grant that expired too is a new quarantine).
    grant: i64,
}

#[derive(Debug)]
struct State {
    /// Bit `id` is set when `owner/<id>` exists.
    held: Vec<u64>,
    /// The etcd revision the mirror reflects (0: never loaded).
    revision: i64,
    /// Whether a watch is delivering every change after `revision`.
    watching: bool,
    /// The grants not released: ID to (ttl in seconds, ownership mod revision).
    granted: HashMap<u32, (u32, i64)>,
    /// Expired IDs not offered until their quarantine ends.
    quarantine: HashMap<u32, Quarantine>,
}

impl State {
    /// Quarantines `id`, whose grant `(ttl_secs, grant)` expired (seen now),
    /// unless that same expiry is quarantined already.
    fn expired(&mut self, id: u32, (ttl_secs, grant): (u32, i64), now: Instant) {
        if self.quarantine.get(&id).is_some_and(|q| q.grant == grant) {
            return;
        }
        let until = now + Duration::from_secs(u64::from(ttl_secs)) + QUARANTINE_MARGIN;
        self.quarantine.insert(id, Quarantine { until, grant });
    }
}

/// The held IDs of one namespace.
#[derive(Debug)]
pub(crate) struct Mirror {
    keys: Keys,
    max_worker_id: u32,
    /// Whether an acquire transaction found the namespace's config equal to
    /// `max_worker_id` (it never changes once written).
    config_confirmed: AtomicBool,
    state: Mutex<State>,
    watch: Mutex<Option<AbortHandle>>,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        if let Some(task) = self.watch.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

impl Mirror {
    /// A mirror that knows nothing yet; [`Mirror::follow`] starts its watch.
    pub fn new(keys: Keys, max_worker_id: u32) -> Arc<Mirror> {
        let words = (max_worker_id as usize + 1).div_ceil(64);
        Arc::new(Mirror {
            keys,
            max_worker_id,
            config_confirmed: AtomicBool::new(false),
            state: Mutex::new(State {
                held: vec![0; words],
                revision: 0,
                watching: false,
                granted: HashMap::new(),
                quarantine: HashMap::new(),
            }),
            watch: Mutex::new(None),
        })
    }

    pub fn max_worker_id(&self) -> u32 {
        self.max_worker_id
    }

    /// Whether the namespace's config is known to be `max_worker_id`.
    pub fn config_confirmed(&self) -> bool {
        self.config_confirmed.load(Ordering::Relaxed)
    }

    /// Records that an acquire transaction compared the config equal.
    pub fn confirm_config(&self) {
        self.config_confirmed.store(true, Ordering::Relaxed);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the watch runs, so that [`Mirror::candidates`] is current.
    pub fn watching(&self) -> bool {
        self.state().watching
    }

    /// Replaces the contents with `snapshot`, unless the mirror already
    /// reflects a later revision. A grant not released whose owner is gone
    /// expired: it is quarantined from now (unless it already was).
    pub fn install(&self, snapshot: &Snapshot) {
        let now = Instant::now();
        let mut state = self.state();
        if snapshot.revision < state.revision {
            return;
        }
        state.held.iter_mut().for_each(|w| *w = 0);
        for &id in &snapshot.held {
            set(&mut state.held, id, true);
        }
        state.granted = snapshot
            .granted
            .iter()
            .filter(|(id, _, _)| *id <= self.max_worker_id)
            .map(|&(id, ttl, grant)| (id, (ttl, grant)))
            .collect();
        for &(id, ttl, grant) in &snapshot.granted {
            if id <= self.max_worker_id && !get(&state.held, id) {
                state.expired(id, (ttl, grant), now);
            }
        }
        state.revision = snapshot.revision;
    }

    /// Marks `ids` held (a transaction found them taken, or took one).
    pub fn mark_held(&self, ids: &[u32]) {
        let mut state = self.state();
        for &id in ids {
            set(&mut state.held, id, true);
        }
    }

    /// Up to `n` IDs the mirror believes free and not in quarantine, from a
    /// random starting point (so that processes acquiring at once seldom pick
    /// the same ones).
    pub fn candidates(&self, n: usize) -> Vec<u32> {
        let now = Instant::now();
        let mut state = self.state();
        state.quarantine.retain(|_, q| q.until > now);
        let state = state;
        let total = u64::from(self.max_worker_id) + 1;
        let start = rand::rng().random_range(0..total);
        let mut found = Vec::with_capacity(n);
        // From `start` to the end, then from 0 to `start`.
        for (from, to) in [(start, total), (0, start)] {
            let mut id = from;
            while id < to && found.len() < n {
                let word = state.held[(id / 64) as usize];
                if id % 64 == 0 && word == u64::MAX {
                    id += 64;
                    continue;
                }
                if word & (1 << (id % 64)) == 0 && !state.quarantine.contains_key(&(id as u32)) {
                    found.push(id as u32);
                }
                id += 1;
            }
        }
        found
    }

    /// Starts the watch that keeps the mirror current (once).
    pub fn follow(self: &Arc<Self>, cluster: Arc<Cluster>) {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        if watch.is_none() {
            let task = tokio::spawn(follow(Arc::downgrade(self), cluster));
            *watch = Some(task.abort_handle());
        }
    }

    /// Applies the changes of one watch answer. An owner deleted without a
    /// release recorded with it (a release writes `ownership/` in the same
    /// transaction, so in the same answer) expired: its quarantine starts.
    fn apply(&self, events: &[etcd_client::Event], revision: i64) {
        let now = Instant::now();
        let mut state = self.state();
        let mut gone = Vec::new();
        for event in events {
            let Some(kv) = event.kv() else { continue };
            if kv.mod_revision() <= state.revision {
                continue;
            }
            let put = event.event_type() == EventType::Put;
            if let Some(id) = self.keys.owner_id(kv.key()) {
                if id <= self.max_worker_id {
                    set(&mut state.held, id, put);
                    if put {
                        state.quarantine.remove(&id);
                    } else {
                        gone.push(id);
                    }
                }
            } else if let Some(id) = self.keys.id_of("ownership", kv.key()) {
                match Ownership::parse(kv.value()).filter(|_| put) {
                    Some(Ownership::Held { ttl_secs }) => {
                        state.granted.insert(id, (ttl_secs, kv.mod_revision()));
                    }
                    _ => {
                        state.granted.remove(&id);
                    }
                }
            }
        }
        for id in gone {
            if !get(&state.held, id) {
                if let Some(grant) = state.granted.get(&id).copied() {
                    state.expired(id, grant, now);
                }
            }
        }
        state.revision = state.revision.max(revision);
    }

    fn set_watching(&self, watching: bool) {
        self.state().watching = watching;
    }

    fn revision(&self) -> i64 {
        self.state().revision
    }
}

fn get(bits: &[u64], id: u32) -> bool {
    bits.get((id / 64) as usize)
        .is_some_and(|w| w & (1 << (id % 64)) != 0)
}

fn set(bits: &mut [u64], id: u32, held: bool) {
    let (word, bit) = ((id / 64) as usize, id % 64);
    if let Some(w) = bits.get_mut(word) {
        if held {
            *w |= 1 << bit;
        } else {
            *w &= !(1 << bit);
        }
    }
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
            } else if let Some(id) = keys.id_of("ownership", kv.key()) {
                if let Some(Ownership::Held { ttl_secs }) = Ownership::parse(kv.value()) {
                    snapshot.granted.push((id, ttl_secs, kv.mod_revision()));
                }
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

/// The watch loop: (re)loads when needed, then applies every change; on any
/// failure it moves to another endpoint and starts over from the last revision
/// it saw. Ends when the mirror is dropped.
async fn follow(mirror: Weak<Mirror>, cluster: Arc<Cluster>) {
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(m) = mirror.upgrade() else { return };
        if m.revision() == 0 {
            if let Ok(snapshot) = scan(&cluster, &m.keys).await {
                m.install(&snapshot);
            }
        }
        let start = m.revision() + 1;
        let (from, end) = m.keys.owners_and_ownership();
        drop(m);
        if start > 1 {
            if let Ok((index, client)) = cluster.current().await {
                let options = WatchOptions::new()
                    .with_range(end)
                    .with_start_revision(start);
                match client.watch_client().watch(from, Some(options)).await {
                    Ok((_watcher, mut stream)) => {
                        if let Some(m) = mirror.upgrade() {
                            m.set_watching(true);
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
                                    let revision =
                                        answer.header().map(|h| h.revision()).unwrap_or(0);
                                    m.apply(answer.events(), revision);
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
            m.set_watching(false);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workerid_core::Namespace;

    fn mirror(max: u32) -> Arc<Mirror> {
        Mirror::new(Keys::new("p", &Namespace::new("ns").unwrap()), max)
    }

    fn snapshot(held: &[u32], granted: &[(u32, u32, i64)], revision: i64) -> Snapshot {
        Snapshot {
            held: held.to_vec(),
            granted: granted.to_vec(),
            revision,
        }
    }

    fn sorted(mut ids: Vec<u32>) -> Vec<u32> {
        ids.sort();
        ids
    }

    #[test]
    fn candidates_are_the_free_ids() {
        let m = mirror(129);
        let held: Vec<u32> = (0..=129).filter(|id| id % 7 != 0).collect();
        m.install(&snapshot(&held, &[], 5));
        let found = sorted(m.candidates(100));
        assert_eq!(
            found,
            (0..=129).filter(|id| id % 7 == 0).collect::<Vec<_>>()
        );
        m.mark_held(&found);
        assert!(m.candidates(8).is_empty());
    }

    #[test]
    fn an_older_snapshot_does_not_replace_a_newer_one() {
        let m = mirror(3);
        m.install(&snapshot(&[0, 1, 2, 3], &[], 10));
        m.install(&snapshot(&[], &[], 9));
        assert!(m.candidates(4).is_empty());
        m.install(&snapshot(&[0, 1], &[], 11));
        assert_eq!(sorted(m.candidates(4)), vec![2, 3]);
    }

    #[test]
    fn an_expired_grant_is_quarantined_for_its_ttl() {
        let m = mirror(3);
        // 0 is held, 1 expired (granted, owner gone), 2 was released, 3 never used.
        m.install(&snapshot(&[0], &[(0, 5, 7), (1, 5, 8)], 10));
        assert_eq!(sorted(m.candidates(4)), vec![2, 3]);
        let until = m.state().quarantine[&1].until;
        let wait = until - Instant::now();
        assert!(
            wait > Duration::from_secs(5) && wait <= Duration::from_secs(5) + QUARANTINE_MARGIN
        );
        // A later snapshot of the same expiry keeps the first quarantine.
        m.install(&snapshot(&[0], &[(0, 5, 7), (1, 5, 8)], 11));
        assert_eq!(m.state().quarantine[&1].until, until);
        // Once it is over, the ID is a candidate again.
        m.state().quarantine.get_mut(&1).unwrap().until = Instant::now();
        assert_eq!(sorted(m.candidates(4)), vec![1, 2, 3]);
        assert!(m.state().quarantine.is_empty());
    }

    #[test]
    fn a_new_expiry_of_the_same_id_is_a_new_quarantine() {
        let m = mirror(0);
        let now = Instant::now();
        let mut state = m.state();
        state.expired(0, (2, 7), now);
        let first = state.quarantine[&0].until;
        state.expired(0, (2, 7), now + Duration::from_secs(1));
        assert_eq!(state.quarantine[&0].until, first);
        state.expired(0, (2, 9), now + Duration::from_secs(1));
        assert_eq!(state.quarantine[&0].until, first + Duration::from_secs(1));
    }
}
