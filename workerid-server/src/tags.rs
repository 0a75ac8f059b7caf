//! The server's own view of the tags: which names exist, refreshed from the
//! store in the background, so that a request for a name the store does not
//! know is answered without a store call and leaves nothing in memory.
//!
//! A tag created in the store by someone else is served once the next
//! refresh has seen it (within `tags_refresh_ms`); the tags of the config
//! are known from the start.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use workerid::segment::{Result, SegmentStore};

/// The most names counted as found missing between two refreshes.
const MAX_MISSING: usize = 1024;

/// Which tags exist, as last read from the store.
#[derive(Debug)]
pub struct Tags {
    known: ArcSwap<HashSet<String>>,
    /// Names of the view the store has since said it does not know (a tag
    /// deleted after the last refresh), counted until the next refresh;
    /// they leave the view at once.
    missing: AtomicUsize,
    /// When the last refresh succeeded, in ms since `epoch` (0: never).
    refreshed_ms: AtomicU64,
    epoch: Instant,
    every: Duration,
}

impl Tags {
    /// An empty view, to be refreshed every `every`.
    pub fn new(every: Duration) -> Tags {
        Tags {
            known: ArcSwap::from_pointee(HashSet::new()),
            missing: AtomicUsize::new(0),
            refreshed_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            every,
        }
    }

    /// Whether requests for `tag` should go to the allocator: one atomic
    /// load and a set lookup, no lock.
    pub fn known(&self, tag: &str) -> bool {
        self.known.load().contains(tag)
    }

    /// Puts `tag` in the view: it was just created through this server, and
    /// is served at once rather than after the next refresh.
    pub fn found(&self, tag: &str) {
        if self.known(tag) {
            return;
        }
        self.known.rcu(|known| {
            let mut known = HashSet::clone(known);
            known.insert(tag.to_owned());
            known
        });
    }

    /// Takes `tag` out of the view: the store said it does not know it.
    pub fn found_missing(&self, tag: &str) {
        self.known.rcu(|known| {
            let mut known = HashSet::clone(known);
            known.remove(tag);
            known
        });
        let _ = self
            .missing
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_MISSING).then_some(n + 1)
            });
    }

    /// How many names the view holds, and how many it lost since the last
    /// refresh.
    pub fn sizes(&self) -> (usize, usize) {
        (
            self.known.load().len(),
            self.missing.load(Ordering::Relaxed),
        )
    }

    /// Whether the view was read from the store lately (within three
    /// refresh periods): what gRPC's health service reports for
    /// `Segments`.
    pub fn fresh(&self) -> bool {
        let at = self.refreshed_ms.load(Ordering::Relaxed);
        let now = millis(self.epoch.elapsed());
        at != 0 && now.saturating_sub(at) <= millis(self.every * 3)
    }

    /// Reads the tag list from `store` into the view.
    ///
    /// # Errors
    /// The store's.
    pub async fn refresh(&self, store: &dyn SegmentStore) -> Result<()> {
        let tags = store.list_tags().await?;
        self.replace(tags.into_iter().map(|t| t.tag.as_str().to_owned()));
        Ok(())
    }

    /// Makes `names` the view, as just read from the store.
    pub fn replace(&self, names: impl IntoIterator<Item = String>) {
        self.known.store(Arc::new(names.into_iter().collect()));
        self.missing.store(0, Ordering::Relaxed);
        self.refreshed_ms
            .store(millis(self.epoch.elapsed()).max(1), Ordering::Relaxed);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Refreshes `tags` from `store` every period until `stop` turns true.
pub fn spawn_refresher(
    tags: Arc<Tags>,
    store: Arc<dyn SegmentStore>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(tags.every) => {}
                () = crate::supervisor::stopping(&mut stop) => return,
            }
            if let Err(e) = tags.refresh(store.as_ref()).await {
                tracing::warn!("could not refresh the tag list: {e}");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_found_missing_are_unknown_until_a_refresh() {
        let tags = Tags::new(Duration::from_secs(5));
        assert!(!tags.fresh(), "never read from the store");
        tags.replace(["a".to_string(), "b".to_string()]);
        assert!(tags.known("a") && !tags.known("c"));
        tags.found_missing("a");
        assert!(!tags.known("a") && tags.known("b"));
        for i in 0..2 * MAX_MISSING {
            tags.found_missing(&format!("x{i}"));
        }
        assert_eq!(tags.sizes().1, MAX_MISSING);
    }
}
