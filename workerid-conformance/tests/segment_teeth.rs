//! The segment suite has teeth: flawless counters pass it, and counters with
//! one deliberate flaw each fail it, in the scenario that guards the rule.

mod caught;
use caught::caught;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use workerid_conformance::{run_all_segments, SegmentFactory};

use workerid_segment::{Error, Range, Result, SegmentStore, Tag, TagInfo, MAX_SEGMENT_ID};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Flaw {
    RacyReserve,
    GiveBackIgnoresExpected,
    GiveBackComparesTheValueOnly,
    /// The rule of a server that reads `max_id` as the last ID handed out:
    /// `(max_id, max_id + step]`, which repeats the boundary ID of every
    /// range beside go-id-alloc or Leaf on one table.
    LastHandedOutRule,
    /// Declares no give-backs, and gives back all the same.
    GivesBackWithoutDeclaringIt,
    /// The version is the new `max_id`: after a give-back a later
    /// reservation repeats a version the tag had before.
    VersionIsTheMax,
    /// No end: ranges go past 2^63 - 1.
    NeverExhausted,
    /// Counts with a float (as a naive Lua script would): IDs near 2^63 are
    /// rounded.
    CountsWithFloats,
    /// Declares itself durable, and forgets every tag on a restart.
    ForgetsOnRestart,
    /// A reservation of an unknown tag creates it (an upsert), at 1 with a
    /// step of 1000, instead of answering `UnknownTag`.
    ReserveCreatesUnknownTags,
    /// Creating an existing tag overwrites it (a `REPLACE`), counter and
    /// step, while answering that it existed: its IDs are handed out again.
    CreateOverwritesExisting,
    /// A give-back leaves the version as it was: replayed after a server
    /// that knows no version reserved the IDs it gave back, it takes them
    /// back from that server.
    GiveBackKeepsTheVersion,
    /// A give-back with a `new_max` above the range's end is refused before
    /// the tag is looked up: an unknown tag then reads as a refusal.
    GiveBackChecksTheRangeFirst,
    /// A give-back of nothing (`new_max` at the range's end) is answered
    /// true and leaves the version: the range can be given back again.
    GiveBackOfNothingKeepsTheVersion,
}

/// Per tag: max (the first ID not handed out), default step, version.
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
            // A restart (of the factory) keeps the counters: durable.
            durable: true,
            give_back: self.flaw != Some(Flaw::GivesBackWithoutDeclaringIt),
            list: true,
            ..Default::default()
        }
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let mut tags = self.tags.lock().unwrap();
        let existed = tags.contains_key(tag.as_str());
        if existed && self.flaw != Some(Flaw::CreateOverwritesExisting) {
            return Ok(false);
        }
        let max = if self.flaw == Some(Flaw::LastHandedOutRule) {
            first_id.saturating_sub(1)
        } else {
            first_id
        };
        tags.insert(tag.to_string(), (max, step, 0));
        Ok(!existed)
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let unknown = || Error::UnknownTag {
            tag: tag.to_string(),
        };
        if self.flaw == Some(Flaw::ReserveCreatesUnknownTags) {
            let mut tags = self.tags.lock().unwrap();
            tags.entry(tag.to_string()).or_insert((1, 1000, 0));
        }
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
        let end = entry.0.checked_add(step.unwrap_or(default));
        if end.is_none_or(|end| end > MAX_SEGMENT_ID) && self.flaw != Some(Flaw::NeverExhausted) {
            return Err(Error::TagExhausted {
                tag: tag.to_string(),
            });
        }
        if self.flaw == Some(Flaw::CountsWithFloats) {
            entry.0 = entry.0 as f64 as u64;
        }
        let (first, last) = match self.flaw {
            Some(Flaw::RacyReserve) => (max, last - 1),
            Some(Flaw::LastHandedOutRule) => (entry.0 + 1, entry.0 + step.unwrap_or(default)),
            _ => (entry.0, entry.0 + step.unwrap_or(default) - 1),
        };
        entry.0 = if self.flaw == Some(Flaw::LastHandedOutRule) {
            last
        } else {
            last + 1
        };
        entry.2 = if self.flaw == Some(Flaw::VersionIsTheMax) {
            entry.0
        } else {
            entry.2 + 1
        };
        Ok(Range {
            first,
            last,
            version: entry.2,
        })
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        if self.flaw == Some(Flaw::GiveBackChecksTheRangeFirst) && new_max > reserved.end() {
            return Ok(false);
        }
        let mut tags = self.tags.lock().unwrap();
        let entry = tags
            .get_mut(tag.as_str())
            .ok_or_else(|| Error::UnknownTag {
                tag: tag.to_string(),
            })?;
        let version_ok =
            entry.2 == reserved.version || self.flaw == Some(Flaw::GiveBackComparesTheValueOnly);
        let end = if self.flaw == Some(Flaw::LastHandedOutRule) {
            reserved.last
        } else {
            reserved.end()
        };
        let untouched = entry.0 == end && version_ok;
        if new_max > end || (!untouched && self.flaw != Some(Flaw::GiveBackIgnoresExpected)) {
            return Ok(false);
        }
        let nothing = new_max == end && self.flaw == Some(Flaw::GiveBackOfNothingKeepsTheVersion);
        entry.0 = new_max;
        if self.flaw != Some(Flaw::GiveBackKeepsTheVersion) && !nothing {
            entry.2 += 1;
        }
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
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        if self.0.flaw == Some(Flaw::ForgetsOnRestart) {
            self.0.tags.lock().unwrap().clear();
        }
    }
    async fn reserve_without_version(&self, tag: &Tag, step: u64) -> bool {
        let mut tags = self.0.tags.lock().unwrap();
        let entry = tags.get_mut(tag.as_str()).expect("a tag the scenario made");
        entry.0 += step;
        true
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
    let store = Counters {
        flaw: None,
        tags: Arc::default(),
    };
    let report = run_all_segments(&Factory(store)).await;
    report.assert_passed();
    assert!(report.skipped().is_empty(), "{:?}", report.skipped());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_give_back_comparing_the_value_only_fails_nothing_else() {
    assert_eq!(
        failed(Some(Flaw::GiveBackComparesTheValueOnly)).await,
        vec![
            "replayed_give_back_is_refused",
            "replayed_give_back_is_refused_after_a_versionless_reservation"
        ]
    );
}

// One test per flaw: the suite must fail, and in the scenario named.

caught! {
    catches_a_durable_store_that_forgets: ForgetsOnRestart by ranges_survive_a_restart;
    catches_a_racy_reserve: RacyReserve by ranges_never_overlap_under_contention;
    catches_a_give_back_that_ignores_the_expected_max: GiveBackIgnoresExpected by give_back_only_when_untouched;
    catches_a_give_back_that_compares_the_value_only: GiveBackComparesTheValueOnly by replayed_give_back_is_refused;
    catches_the_last_handed_out_rule: LastHandedOutRule by max_id_is_the_first_id_not_handed_out;
    catches_a_give_back_the_store_does_not_declare: GivesBackWithoutDeclaringIt by give_back_only_when_untouched;
    catches_a_version_that_comes_again: VersionIsTheMax by replayed_give_back_is_refused;
    catches_a_tag_that_never_ends: NeverExhausted by a_tag_at_its_end_is_exhausted;
    catches_ids_counted_with_floats: CountsWithFloats by a_tag_at_its_end_is_exhausted;
    catches_a_reserve_that_creates_unknown_tags: ReserveCreatesUnknownTags by unknown_tags_and_listing;
    catches_a_create_that_overwrites_a_tag: CreateOverwritesExisting by unknown_tags_and_listing;
    catches_a_give_back_that_keeps_the_version: GiveBackKeepsTheVersion by replayed_give_back_is_refused_after_a_versionless_reservation;
    catches_a_give_back_that_hides_an_unknown_tag: GiveBackChecksTheRangeFirst by unknown_tags_and_listing;
    catches_a_give_back_of_nothing_that_keeps_the_version: GiveBackOfNothingKeepsTheVersion by replayed_give_back_is_refused;
}
