//! The segment suite has teeth: flawless counters pass it, and counters with
//! one deliberate flaw each fail it, in the scenario that guards the rule.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use workerid_conformance::{run_all_segments, SegmentFactory};

use workerid_segment::{Error, Range, Result, SegmentStore, Tag, TagInfo};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Flaw {
    RacyReserve,
    GiveBackIgnoresExpected,
    GiveBackComparesTheValueOnly,
}

/// Per tag: max, default step, version.
type Tags = BTreeMap<String, (u64, u64, u64)>;

#[derive(Debug, Clone)]
struct Counters {
    flaw: Option<Flaw>,
    tags: Arc<Mutex<Tags>>,
}

#[async_trait]
impl SegmentStore for Counters {
    fn segment_capabilities(&self) -> workerid_segment::SegmentCapabilities {
        workerid_segment::SegmentCapabilities {
            durable: false,
            ..Default::default()
        }
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let mut tags = self.tags.lock().unwrap();
        if tags.contains_key(tag.as_str()) {
            return Ok(false);
        }
        tags.insert(tag.to_string(), (first_id - 1, step, 0));
        Ok(true)
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let unknown = || Error::UnknownTag {
            tag: tag.to_string(),
        };
        let (max, default, _) = *self
            .tags
            .lock()
            .unwrap()
            .get(tag.as_str())
            .ok_or_else(unknown)?;
        if self.flaw == Some(Flaw::RacyReserve) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let last = max + step.unwrap_or(default);
        let mut tags = self.tags.lock().unwrap();
        let entry = tags.get_mut(tag.as_str()).ok_or_else(unknown)?;
        let first = if self.flaw == Some(Flaw::RacyReserve) {
            max + 1
        } else {
            entry.0 + 1
        };
        let last = if self.flaw == Some(Flaw::RacyReserve) {
            last
        } else {
            entry.0 + step.unwrap_or(default)
        };
        entry.0 = last;
        entry.2 += 1;
        Ok(Range {
            first,
            last,
            version: entry.2,
        })
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        let mut tags = self.tags.lock().unwrap();
        let entry = tags
            .get_mut(tag.as_str())
            .ok_or_else(|| Error::UnknownTag {
                tag: tag.to_string(),
            })?;
        let version_ok =
            entry.2 == reserved.version || self.flaw == Some(Flaw::GiveBackComparesTheValueOnly);
        let untouched = entry.0 == reserved.last && version_ok;
        if new_max > reserved.last
            || (!untouched && self.flaw != Some(Flaw::GiveBackIgnoresExpected))
        {
            return Ok(false);
        }
        entry.0 = new_max;
        Ok(true)
    }
    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        let tags = self.tags.lock().unwrap();
        Ok(tags
            .iter()
            .map(|(t, (max_id, step, _))| TagInfo {
                tag: Tag::new(t.clone()).unwrap(),
                max_id: *max_id,
                step: *step,
            })
            .collect())
    }
}

struct Factory(Counters);

#[async_trait]
impl SegmentFactory for Factory {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.0.clone())
    }
}

async fn failed(flaw: Option<Flaw>) -> Vec<&'static str> {
    let store = Counters {
        flaw,
        tags: Arc::default(),
    };
    run_all_segments(&Factory(store)).await.failed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_flawless_counters_pass() {
    assert_eq!(failed(None).await, Vec::<&str>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn catches_a_racy_reserve() {
    assert!(failed(Some(Flaw::RacyReserve))
        .await
        .contains(&"ranges_never_overlap_under_contention"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn catches_a_give_back_that_ignores_the_expected_max() {
    assert!(failed(Some(Flaw::GiveBackIgnoresExpected))
        .await
        .contains(&"give_back_only_when_untouched"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn catches_a_give_back_that_compares_the_value_only() {
    assert_eq!(
        failed(Some(Flaw::GiveBackComparesTheValueOnly)).await,
        vec!["replayed_give_back_is_refused"]
    );
}
