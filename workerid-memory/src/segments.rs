//! The memory store's segment counters.

use std::collections::BTreeMap;

use workerid_segment::{Error, Result};
use workerid_segment::{Range, Tag, TagInfo, MAX_SEGMENT_ID};

/// One tag's counter.
#[derive(Debug)]
struct Counter {
    /// The first ID not handed out yet.
    max: u64,
    /// The default step.
    step: u64,
    /// Bumped by every reservation, for give-backs to compare.
    version: u64,
}

/// Per tag: its counter.
#[derive(Debug, Default)]
pub(crate) struct Counters(BTreeMap<Tag, Counter>);

impl Counters {
    pub(crate) fn create(&mut self, tag: &Tag, first_id: u64, step: u64) -> bool {
        if self.0.contains_key(tag) {
            return false;
        }
        self.0.insert(
            tag.clone(),
            Counter {
                max: first_id,
                step,
                version: 0,
            },
        );
        true
    }

    pub(crate) fn reserve(&mut self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let counter = self.0.get_mut(tag).ok_or_else(|| Error::UnknownTag {
            tag: tag.to_string(),
        })?;
        let step = step.unwrap_or(counter.step);
        let max = counter
            .max
            .checked_add(step)
            .filter(|max| *max <= MAX_SEGMENT_ID)
            .ok_or_else(|| Error::TagExhausted {
                tag: tag.to_string(),
            })?;
        let range = Range::below(max, step, counter.version + 1)
            .ok_or_else(|| Error::invalid_config(format!("tag {tag}: a step of {step}")))?;
        counter.max = max;
        counter.version += 1;
        Ok(range)
    }

    pub(crate) fn give_back(&mut self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        let counter = self.0.get_mut(tag).ok_or_else(|| Error::UnknownTag {
            tag: tag.to_string(),
        })?;
        if counter.max != reserved.end()
            || counter.version != reserved.version
            || new_max > reserved.end()
        {
            return Ok(false);
        }
        counter.max = new_max;
        counter.version += 1;
        Ok(true)
    }

    pub(crate) fn list(&self) -> Vec<TagInfo> {
        self.0
            .iter()
            .map(|(tag, counter)| TagInfo {
                tag: tag.clone(),
                max_id: counter.max,
                step: counter.step,
            })
            .collect()
    }
}
