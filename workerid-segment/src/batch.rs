//! Many IDs of one tag in one call.

use std::ops::Range;

use crate::cursor::MAX_CLAIM;
use crate::{Error, Result, SegmentAllocator, TagHandle};

impl TagHandle {
    /// `count` IDs of this tag at once, as runs of consecutive IDs in the
    /// order handed out: each run claimed from the current segment with one
    /// atomic add, the next segment switched to when one runs out, exactly as
    /// `count` calls of [`next_id`](Self::next_id) would (adjacent runs
    /// merged).
    ///
    /// ```
    /// use workerid_segment::{SegmentAllocator, SegmentOptions, SegmentStore};
    ///
    /// async fn demo(store: impl SegmentStore) -> workerid_segment::Result<()> {
    ///     let ids = SegmentAllocator::new(store, SegmentOptions::default());
    ///     ids.create_tag("orders", 1, 1_000).await?;
    ///     let runs = ids.tag("orders")?.next_ids(2_500).await?;
    ///     assert_eq!(runs.iter().map(|r| r.end - r.start).sum::<u64>(), 2_500);
    ///     Ok(())
    /// }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a count of 0 or above 2^32, before any
    /// ID is taken; otherwise as [`next_id`](Self::next_id). IDs taken
    /// before an error are not handed out again (a gap, never a repeat).
    pub async fn next_ids(&self, count: u64) -> Result<Vec<Range<u64>>> {
        if !(1..=MAX_CLAIM).contains(&count) {
            return Err(Error::invalid_config(format!(
                "a batch of {count} IDs (1 to 2^32)"
            )));
        }
        let mut runs: Vec<Range<u64>> = Vec::new();
        let mut left = count;
        while left > 0 {
            let run = match self.claim(left) {
                Some((first, end)) => first..end,
                None => {
                    let id = Box::pin(self.switch_and_take()).await?;
                    id..id + 1
                }
            };
            left -= run.end - run.start;
            match runs.last_mut() {
                Some(last) if last.end == run.start => last.end = run.end,
                _ => runs.push(run),
            }
        }
        Ok(runs)
    }
}

impl SegmentAllocator {
    /// `count` IDs of `tag` at once: [`TagHandle::next_ids`]. A tag the
    /// store does not know leaves no handle behind, as with
    /// [`next_id`](Self::next_id).
    ///
    /// # Errors
    /// As [`TagHandle::next_ids`], and [`Error::InvalidConfig`] for a bad
    /// tag.
    pub async fn next_ids(&self, tag: &str, count: u64) -> Result<Vec<Range<u64>>> {
        let handle = self.tag(tag)?;
        let answer = handle.next_ids(count).await;
        if let Err(Error::UnknownTag { .. }) = answer {
            self.forget(handle);
        }
        answer
    }
}
