//! Consecutive numbers, one store round trip each.

use std::sync::Arc;

use crate::{Error, Result, SegmentStore, Tag};

/// Gapless sequences: every number is one atomic round trip to the store,
/// one above the number before it, nothing cached, so a crash between calls
/// loses nothing.
///
/// A number is taken when the store commits it, not when the caller uses
/// it: a call whose answer is lost (a timeout, a dropped connection), and a
/// caller that fails after taking a number, leave that number unused. Where
/// every number must end in a record, take it in the same transaction as
/// the record, or keep the failed ones for reuse.
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

    /// The next number of `tag`: its `max_id`, which moves up by one (never
    /// 0: a tag at 0 gives 1).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag; [`Error::UnknownTag`] for a
    /// tag the store does not have; [`Error::Unsupported`] on a store that
    /// does not declare [`gapless`](crate::SegmentCapabilities::gapless);
    /// the store's errors ([`Error::Unavailable`]: the number may have been
    /// taken, and is then skipped).
    pub async fn next_id(&self, tag: &str) -> Result<u64> {
        if !self.store.segment_capabilities().gapless {
            return Err(Error::Unsupported {
                operation: "gapless sequences",
            });
        }
        let tag = Tag::new(tag)?;
        loop {
            // ID 0 is never handed out: a tag created at 0 starts at 1.
            let id = self.store.reserve(&tag, Some(1)).await?.first;
            if id != 0 {
                return Ok(id);
            }
        }
    }
}
