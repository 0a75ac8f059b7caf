//! One tag's metric handles, taken when its buffers are made.

use std::fmt;

use metrics::{Counter, Gauge};
use workerid_core::observe::{SEGMENT_BUFFER_IDS, SEGMENT_IDS, SEGMENT_LOADS, SEGMENT_STALLS};

use crate::Tag;

/// The metrics of one tag.
pub(crate) struct TagMeters {
    loads: Counter,
    stalls: Counter,
    ids: Counter,
    buffer: Gauge,
}

impl fmt::Debug for TagMeters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TagMeters")
    }
}

impl TagMeters {
    pub(crate) fn new(tag: &Tag) -> TagMeters {
        let tag = tag.as_str().to_owned();
        TagMeters {
            loads: metrics::counter!(SEGMENT_LOADS, "tag" => tag.clone()),
            stalls: metrics::counter!(SEGMENT_STALLS, "tag" => tag.clone()),
            ids: metrics::counter!(SEGMENT_IDS, "tag" => tag.clone()),
            buffer: metrics::gauge!(SEGMENT_BUFFER_IDS, "tag" => tag),
        }
    }

    pub(crate) fn loaded(&self) {
        self.loads.increment(1);
    }

    pub(crate) fn stalled(&self) {
        self.stalls.increment(1);
    }

    /// A segment was replaced after `used` of its IDs were handed out;
    /// `left` IDs are in memory now.
    pub(crate) fn switched(&self, used: u64, left: u64) {
        self.ids.increment(used);
        self.buffer.set(left as f64);
    }

    pub(crate) fn buffered(&self, left: u64) {
        self.buffer.set(left as f64);
    }
}
