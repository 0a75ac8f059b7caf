//! The memory store's segment counters.

use std::collections::BTreeMap;

use workerid_core::segment::{Range, Tag, TagInfo, MAX_SEGMENT_ID};
use workerid_core::{Error, Result};

/// Per tag: the last ID handed out and the default step.
#[derive(Debug, Default)]
pub(crate) struct Counters(BTreeMap<Tag, (u64, u64)>);

impl Counters {
    pub(crate) fn create(&mut self, tag: &Tag, first_id: u64, step: u64) -> bool {
        if self.0.contains_key(tag) {
            return false;
        }
        self.0.insert(tag.clone(), (first_id - 1, step));
        true
    }

    pub(crate) fn reserve(&mut self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let (max, default) = self.0.get_mut(tag).ok_or_else(|| Error::UnknownTag {
            tag: tag.to_string(),
        })?;
        let step = step.unwrap_or(*default);
        let last = max
            .checked_add(step)
            .filter(|last| *last <= MAX_SEGMENT_ID)
            .ok_or_else(|| Error::TagExhausted {
                tag: tag.to_string(),
            })?;
        let first = *max + 1;
        *max = last;
        Ok(Range { first, last })
    }

    pub(crate) fn give_back(&mut self, tag: &Tag, expected: u64, new_max: u64) -> Result<bool> {
        let (max, _) = self.0.get_mut(tag).ok_or_else(|| Error::UnknownTag {
            tag: tag.to_string(),
        })?;
        if *max != expected || new_max > expected {
            return Ok(false);
        }
        *max = new_max;
        Ok(true)
    }

    pub(crate) fn list(&self) -> Vec<TagInfo> {
        self.0
            .iter()
            .map(|(tag, (max_id, step))| TagInfo {
                tag: tag.clone(),
                max_id: *max_id,
                step: *step,
            })
            .collect()
    }
}
