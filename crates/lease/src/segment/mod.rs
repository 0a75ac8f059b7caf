//! Segment IDs (Leaf-segment): per-tag counters in a store hand out ranges of
//! IDs, which an in-process [`SegmentAllocator`] serves from memory with a
//! double buffer; [`GaplessSequence`] for consecutive numbers.

mod allocator;
mod cursor;
mod store;

pub use allocator::{GaplessSequence, LocalIds, SegmentAllocator, SegmentOptions, TagHandle};
pub use store::{
    check_step, Range, SegmentCapabilities, SegmentStore, Tag, TagInfo, MAX_SEGMENT_ID, MAX_STEP,
    MAX_TAG_LEN,
};
