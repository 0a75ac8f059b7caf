//! How a segment allocator buffers and sizes its steps.

use std::time::Duration;

/// How a [`SegmentAllocator`](crate::SegmentAllocator) buffers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentOptions {
    /// Load the next segment once this share of the current one is used
    /// (Leaf: 0.1).
    pub refill_at: f64,
    /// Double the step when a segment lasted less than this (Leaf: 15 min).
    pub grow_below: Duration,
    /// Halve the step when a segment lasted more than this (Leaf: 30 min).
    pub shrink_above: Duration,
    /// The step never goes below this (nor below 1); `None` (the default):
    /// below the tag's own step, the one its first segment was reserved
    /// with, as Leaf's `minStep` is the row's `step`...
    pub min_step: Option<u64>,
    /// ...nor above this (nor above [`MAX_STEP`](crate::MAX_STEP), the
    /// largest a store reserves: a larger value bounds nothing more).
    pub max_step: u64,
    /// After the store failed to answer, a tag with no IDs in memory answers
    /// [`Error::Unavailable`](crate::Error::Unavailable) at once, without a
    /// store call, while a background task tries to load a segment: 10 ms
    /// after the failure, then at doubling intervals up to this one. The
    /// first request after the store is back is served within it.
    pub outage_probe_max: Duration,
    /// Every store call of the allocator fails with
    /// [`Error::Unavailable`](crate::Error::Unavailable) after this long
    /// without an answer ([`TimeLimited`](crate::TimeLimited)), so that a
    /// store that hangs holds no tag's callers, nor shutdown, for good;
    /// `None`: calls wait as long as the store takes (for a store wrapped
    /// in a bound of its own). Default 10 s.
    pub request_timeout: Option<Duration>,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            refill_at: 0.1,
            grow_below: Duration::from_secs(15 * 60),
            shrink_above: Duration::from_secs(30 * 60),
            min_step: None,
            max_step: 1_000_000,
            outage_probe_max: Duration::from_millis(200),
            request_timeout: Some(Duration::from_secs(10)),
        }
    }
}
