//! # workerid-segment
//!
//! Segment IDs (Leaf-segment): per-tag counters in a store hand out ranges of
//! IDs, which an in-process [`SegmentAllocator`] serves from memory with a
//! double buffer; [`GaplessSequence`] for consecutive numbers.

#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod allocator;
mod batch;
mod cursor;
mod error;
mod gapless;
mod instrumented;
mod local;
mod meters;
mod options;
mod store;
mod sync;
mod tag;
mod time_limited;

pub use allocator::SegmentAllocator;
pub use error::{BoxError, Error, Result};
pub use gapless::GaplessSequence;
pub use local::LocalIds;
pub use options::SegmentOptions;
pub use store::{
    check_first_range, check_step, Range, SegmentCapabilities, SegmentStore, Tag, TagInfo,
    MAX_SEGMENT_ID, MAX_STEP, MAX_TAG_LEN,
};
pub use tag::TagHandle;
pub use time_limited::TimeLimited;
