//! Consecutive numbers with no holes, one store round trip each.

use std::sync::Arc;

use crate::{Error, Result, SegmentStore, Tag};

/// Gapless sequences (consecutive numbers, no holes): every ID is one atomic round
/// trip to the store, consecutive, nothing cached, nothing lost on a crash.
#[derive(Debug)]
pub struct GaplessSequence {
    store: Arc<dyn SegmentStore>,
}

impl GaplessSequence {
    /// Sequences on `store`.
    pub fn new(store: impl SegmentStore) -> Self {
        GaplessSequence {
            store: Arc::new(store),
        }
    }

    /// The next number of `tag`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag; [`Error::Unsupported`] on a
    /// store that does not declare
    /// [`gapless`](crate::SegmentCapabilities::gapless); the store's errors.
    pub async fn next_id(&self, tag: &str) -> Result<u64> {
        if !self.store.segment_capabilities().gapless {
            return Err(Error::Unsupported {
                operation: "gapless sequences",
            });
        }
        Ok(self.store.reserve(&Tag::new(tag)?, Some(1)).await?.first)
    }
}
