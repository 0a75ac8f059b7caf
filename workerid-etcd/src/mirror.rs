//! A namespace's held IDs as this process last saw them: a snapshot of the
//! `owner/` keys, kept current by a watch.
//!
//! The mirror only *suggests* candidates to acquire; the guarded transaction
//! decides. A stale mirror costs a lost race (the transaction finds the
//! candidate taken) or a missed free ID, and acquire never answers
//! `NoAvailableId` from the mirror alone: it asks etcd first (see
//! [`EtcdStore::scan`](crate::EtcdStore)). So acquire costs O(1) round trips
//! and no scan while the watch runs, whatever the pool size.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use etcd_client::{EventType, GetOptions, WatchOptions};
use rand::Rng;
use tokio::task::AbortHandle;

use crate::cluster::Cluster;
use crate::keys::Keys;

/// How many keys one page of a scan asks for.
const PAGE: i64 = 10_000;

#[derive(Debug)]
struct State {
    /// Bit `id` is set when `owner/<id>` exists.
    held: Vec<u64>,
    /// The etcd revision the mirror reflects (0: never loaded).
    revision: i64,
    /// Whether a watch is delivering every change after `revision`.
    watching: bool,
}

/// The held IDs of one namespace.
#[derive(Debug)]
pub(crate) struct Mirror {
    keys: Keys,
    max_worker_id: u32,
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
            state: Mutex::new(State {
                held: vec![0; words],
                revision: 0,
                watching: false,
            }),
            watch: Mutex::new(None),
        })
    }

    pub fn max_worker_id(&self) -> u32 {
        self.max_worker_id
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the watch runs, so that [`Mirror::candidates`] is current.
    pub fn watching(&self) -> bool {
        self.state().watching
    }

    /// Replaces the contents with the IDs `held` at `revision`, unless the
    /// mirror already reflects a later revision.
    pub fn install(&self, held: &[u32], revision: i64) {
        let mut state = self.state();
        if revision < state.revision {
            return;
        }
        state.held.iter_mut().for_each(|w| *w = 0);
        for &id in held {
            set(&mut state.held, id, true);
        }
        state.revision = revision;
    }

    /// Marks `ids` held (a transaction found them taken, or took one).
    pub fn mark_held(&self, ids: &[u32]) {
        let mut state = self.state();
        for &id in ids {
            set(&mut state.held, id, true);
        }
    }

    /// Up to `n` IDs the mirror believes free, from a random starting point
    /// (so that processes acquiring at once seldom pick the same ones).
    pub fn candidates(&self, n: usize) -> Vec<u32> {
        let state = self.state();
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
                if word & (1 << (id % 64)) == 0 {
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

    fn apply(&self, events: &[etcd_client::Event], revision: i64) {
        let mut state = self.state();
        for event in events {
            let Some(kv) = event.kv() else { continue };
            if kv.mod_revision() <= state.revision {
                continue;
            }
            if let Some(id) = self.keys.owner_id(kv.key()) {
                if id <= self.max_worker_id {
                    set(&mut state.held, id, event.event_type() == EventType::Put);
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

/// Reads every `owner/` key of the namespace (keys only, in pages, at one
/// revision). Returns the held IDs, how many there are, and the revision.
pub(crate) async fn scan(cluster: &Cluster, keys: &Keys) -> workerid_core::Result<(Vec<u32>, i64)> {
    let prefix = keys.owners();
    let end = prefix_end(&prefix);
    let mut from = prefix.clone().into_bytes();
    let mut revision = 0;
    let mut held = Vec::new();
    loop {
        let mut options = GetOptions::new()
            .with_range(end.clone())
            .with_keys_only()
            .with_limit(PAGE);
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
        held.extend(answer.kvs().iter().filter_map(|kv| keys.owner_id(kv.key())));
        match answer.kvs().last() {
            Some(last) if answer.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    Ok((held, revision))
}

/// The end of the range of keys that start with `prefix`.
pub(crate) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    // Prefixes here end in '/', never 0xff.
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// The watch loop: (re)loads when needed, then applies every change; on any
/// failure it moves to another endpoint and starts over from the last revision
/// it saw. Ends when the mirror is dropped.
async fn follow(mirror: Weak<Mirror>, cluster: Arc<Cluster>) {
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(m) = mirror.upgrade() else { return };
        if m.revision() == 0 {
            if let Ok((held, revision)) = scan(&cluster, &m.keys).await {
                m.install(&held, revision);
            }
        }
        let start = m.revision() + 1;
        let prefix = m.keys.owners();
        drop(m);
        if start > 1 {
            if let Ok((index, client)) = cluster.current().await {
                let options = WatchOptions::new().with_prefix().with_start_revision(start);
                match client.watch_client().watch(prefix, Some(options)).await {
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

    #[test]
    fn candidates_are_the_free_ids() {
        let m = mirror(129);
        let held: Vec<u32> = (0..=129).filter(|id| id % 7 != 0).collect();
        m.install(&held, 5);
        let mut found = m.candidates(100);
        found.sort();
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
        m.install(&[0, 1, 2, 3], 10);
        m.install(&[], 9);
        assert!(m.candidates(4).is_empty());
        m.install(&[0, 1], 11);
        let mut found = m.candidates(4);
        found.sort();
        assert_eq!(found, vec![2, 3]);
    }
}
