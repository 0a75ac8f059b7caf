//! The dynamic step's floor is the tag's own step unless the options set
//! one, as Leaf's `minStep` is the row's `step`: a tag made with a small
//! step for numbers people read stays at it, never jumps to a thousand.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use workerid_memory::MemoryStore;
use workerid_segment::{
    Range, Result, SegmentAllocator, SegmentCapabilities, SegmentOptions, SegmentStore, Tag,
    TagInfo,
};

/// The memory store, recording the step of every reservation asked for.
#[derive(Debug, Default)]
struct Recording {
    inner: MemoryStore,
    steps: Mutex<Vec<Option<u64>>>,
}

#[async_trait]
impl SegmentStore for Recording {
    fn segment_capabilities(&self) -> SegmentCapabilities {
        self.inner.segment_capabilities()
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        self.inner.create_tag(tag, first_id, step).await
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        self.steps.lock().unwrap().push(step);
        self.inner.reserve(tag, step).await
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        self.inner.give_back(tag, reserved, new_max).await
    }
    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        self.inner.list_tags().await
    }
}

/// The steps asked for while 40 IDs of a tag made with a step of 10 are
/// taken, every segment having lasted longer than `shrink_above` (so each
/// next step is half the last, raised to the floor).
async fn steps_asked(min_step: Option<u64>) -> Vec<Option<u64>> {
    let store = Arc::new(Recording::default());
    let options = SegmentOptions {
        min_step,
        grow_below: Duration::ZERO,
        shrink_above: Duration::ZERO,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    ids.create_tag("invoice", 1, 10).await.unwrap();
    for expected in 1..=40 {
        assert_eq!(ids.next_id("invoice").await.unwrap(), expected);
    }
    ids.shutdown().await;
    let steps = store.steps.lock().unwrap().clone();
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_never_goes_below_the_tags_own_step_nor_jumps_above_it() {
    // The row's step first, then halvings raised back to it: 10 every time.
    let steps = steps_asked(None).await;
    assert_eq!(steps[0], None, "the first reservation takes the row's step");
    assert!(steps.len() >= 4, "{steps:?}");
    assert!(steps[1..].iter().all(|s| *s == Some(10)), "{steps:?}");
    // A floor set in the options wins: 10, then 1000.
    let steps = steps_asked(Some(1_000)).await;
    assert_eq!(steps[..2], [None, Some(1_000)], "{steps:?}");
}

/// The last tag the rule for a first range lets in serves its IDs; the
/// next one up is refused before it is made.
#[tokio::test]
async fn the_highest_first_range_allowed_is_served() {
    use workerid_segment::MAX_SEGMENT_ID;

    let ids = SegmentAllocator::new(MemoryStore::new(), SegmentOptions::default());
    let first = MAX_SEGMENT_ID - 1000;
    assert!(ids.create_tag("edge", first, 1000).await.unwrap());
    assert_eq!(ids.next_id("edge").await.unwrap(), first);
    let refused = ids.create_tag("over", first + 1, 1000).await;
    assert!(refused.is_err(), "{refused:?}");
}
