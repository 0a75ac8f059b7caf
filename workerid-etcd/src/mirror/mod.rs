//! A namespace's held IDs as this process last saw them: a snapshot of the
//! `owner/` and `ownership/` keys, kept current by a watch of deletions.
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
//! The mirror tells an ID that was released (a release deletes its
//! `ownership/` record in the same revision as the owner) from one whose
//! etcd lease ran out (the owner alone is deleted). An expired ID is not
//! offered as a candidate until one more of its ttl has passed since this
//! process saw it gone: etcd may delete an owner key early (a stalled old
//! leader's late revocation, or a keep-alive answered by a leader that no
//! longer was one: etcd-io/etcd#15247), but the holder's own deadline is
//! never later than that deletion plus its ttl, so after the quarantine no
//! holder can still believe in it. Every process that sees the ID gone sees
//! it no earlier than the deletion, so each one's quarantine is long enough
//! on its own.
//!
//! # Deletions only, and the record guard
//!
//! The watch asks for deletions only (etcd's `NOPUT` filter): a grant is all
//! puts, so etcd sends this process nothing for it, which keeps a grant as
//! cheap as the same transaction on keys nobody watches. Other processes' grants are
//! therefore unseen: their IDs look free until a transaction finds them
//! taken or a scan reloads the mirror, and an owner deleted without a
//! release is *unresolved* (not offered) until one read of its `ownership/`
//! record tells which grant expired and its ttl.
//!
//! What keeps that safe is not the mirror but the transaction: each
//! candidate carries the mod revision its `ownership/` record had when the
//! mirror judged it free (0 for none), and the take compares it as well as
//! the owner's absence. Every grant writes that record, so a grant the
//! mirror did not see (an early deletion not yet delivered, say) fails the
//! comparison: the take succeeds only if the last grant is the one the
//! mirror saw released, or saw expire at least a quarantine ago.

mod cache;
mod state;
mod watch;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rand::Rng;
use tokio::task::AbortHandle;

use crate::cluster::Cluster;
use crate::keys::Keys;
use state::State;

pub(crate) use cache::Mirrors;
pub(crate) use state::{Candidate, Snapshot};
pub(crate) use watch::scan;

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
    pub(crate) fn new(keys: Keys, max_worker_id: u32) -> Arc<Mirror> {
        Arc::new(Mirror {
            keys,
            max_worker_id,
            state: Mutex::new(State::new(max_worker_id)),
            watch: Mutex::new(None),
        })
    }

    pub(crate) fn max_worker_id(&self) -> u32 {
        self.max_worker_id
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the watch runs, so that [`Mirror::candidates`] is current.
    pub(crate) fn watching(&self) -> bool {
        self.state().watching
    }

    /// Replaces the contents with `snapshot` unless the mirror reflects a
    /// later revision (see [`State::install`]).
    pub(crate) fn install(&self, snapshot: &Snapshot) {
        self.state().install(snapshot, Instant::now());
    }

    /// Marks `id` held (this process took it).
    pub(crate) fn mark_held(&self, id: u32) {
        self.state().mark_held(id);
    }

    /// Marks held the candidates a transaction found taken (see
    /// [`State::mark_taken`]).
    pub(crate) fn mark_taken(&self, candidates: &[Candidate]) {
        self.state().mark_taken(candidates);
    }

    /// Up to `n` IDs the mirror believes free and out of quarantine, each
    /// with the record revision its take must compare, from a random
    /// starting point (so that processes acquiring at once seldom pick the
    /// same ones).
    pub(crate) fn candidates(&self, n: usize) -> Vec<Candidate> {
        let start = rand::rng().random_range(0..=self.max_worker_id);
        self.state().candidates(n, start, Instant::now())
    }

    /// Starts the watch that keeps the mirror current (once).
    pub(crate) fn follow(self: &Arc<Self>, cluster: Arc<Cluster>) {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        if watch.is_none() {
            let task = tokio::spawn(watch::follow(Arc::downgrade(self), cluster));
            *watch = Some(task.abort_handle());
        }
    }
}
