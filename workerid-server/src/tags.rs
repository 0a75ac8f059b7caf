//! The server's own view of the tags: which names exist, refreshed from the
//! store in the background, so that a request for a name the store does not
//! know is answered without a store call and leaves nothing in memory.
//!
//! A tag created in the store by someone else is served once the next
//! refresh has seen it (within `tags_refresh_ms`); the tags of the config
//! are known from the start.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use workerid::segment::SegmentStore;
use workerid::Result;

/// The most names kept as recently found missing: the set only ever holds
/// names that were in the view, so it is small; the bound is a backstop.
const MAX_MISSING: usize = 1024;

/// Which tags exist, as last read from the store.
#[derive(Debug)]
pub struct Tags {
    known: ArcSwap<HashSet<String>>,
    /// Names in the view the store has since said it does not know (a tag
    /// deleted after the last refresh); emptied by each refresh.
    missing: Mutex<HashSet<String>>,
    /// When the last refresh succeeded, in ms since `epoch` (0: never).
    refreshed_ms: AtomicU64,
    epoch: Instant,
    every: Duration,
}

impl Tags {
    /// A view that knows `names` (the config's tags) until the first
    /// refresh, refreshed every `every`.
    pub fn new(names: impl IntoIterator<Item = String>, every: Duration) -> Tags {
        Tags {
            known: ArcSwap::from_pointee(names.into_iter().collect()),
            missing: Mutex::new(HashSet::new()),
            refreshed_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            every,
        }
    }

    /// Whether requests for `tag` should go to the allocator.
    pub fn known(&self, tag: &str) -> bool {
        self.known.load().contains(tag) && !self.lock_missing().contains(tag)
    }

    /// Notes that the store did not know `tag` although the view did.
    pub fn found_missing(&self, tag: &str) {
        let mut missing = self.lock_missing();
        if missing.len() < MAX_MISSING {
            missing.insert(tag.to_owned());
        }
    }

    /// How many names the view holds (known, found missing).
    pub fn sizes(&self) -> (usize, usize) {
        (self.known.load().len(), self.lock_missing().len())
    }

    /// Whether the view was read from the store lately (within three
    /// refresh periods): what `/readyz` reports.
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
        let names: HashSet<String> = tags
            .into_iter()
            .map(|t| t.tag.as_str().to_owned())
            .collect();
        self.known.store(Arc::new(names));
        self.lock_missing().clear();
        self.refreshed_ms
            .store(millis(self.epoch.elapsed()).max(1), Ordering::Relaxed);
        Ok(())
    }

    fn lock_missing(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.missing.lock().unwrap_or_else(|e| e.into_inner())
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
        let tags = Tags::new(["a".to_string(), "b".to_string()], Duration::from_secs(5));
        assert!(tags.known("a") && !tags.known("c"));
        tags.found_missing("a");
        assert!(!tags.known("a") && tags.known("b"));
        assert!(!tags.fresh(), "never read from the store");
        for i in 0..2 * MAX_MISSING {
            tags.found_missing(&format!("x{i}"));
        }
        assert_eq!(tags.sizes().1, MAX_MISSING);
    }
}
