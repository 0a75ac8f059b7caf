//! The dynamic step's floor is the tag's own step unless the options set
//! one, as Leaf's `minStep` is the row's `step`: a tag made with a small
//! step for numbers people read stays at it, never jumps to a thousand.

use std::time::Duration;

use workerid_memory::MemoryStore;
use workerid_segment::{SegmentAllocator, SegmentOptions, SegmentStore};

/// The store's `max_id` after `taken` IDs of a tag made with a step of
/// 10, every segment having lasted longer than `shrink_above` (each next
/// step is half the last, raised to the floor).
async fn max_id_after(min_step: Option<u64>, taken: u64) -> u64 {
    let store = MemoryStore::new();
    let options = SegmentOptions {
        min_step,
        grow_below: Duration::ZERO,
        shrink_above: Duration::ZERO,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    ids.create_tag("invoice", 1, 10).await.unwrap();
    for expected in 1..=taken {
        assert_eq!(ids.next_id("invoice").await.unwrap(), expected);
    }
    let tags = store.list_tags().await.unwrap();
    tags.iter()
        .find(|t| t.tag.as_str() == "invoice")
        .map(|t| t.max_id)
        .expect("the tag")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_never_goes_below_the_tags_own_step_nor_jumps_above_it() {
    // Steps of 10 only (each halving is raised back to 10): 25 IDs take at
    // most four segments, the last one prefetched.
    let max_id = max_id_after(None, 25).await;
    assert!(
        max_id <= 41,
        "max_id {max_id}: the step left the tag's own 10"
    );
    // A floor set in the options wins: 10, then 1000.
    let max_id = max_id_after(Some(1_000), 25).await;
    assert!(max_id > 1_000, "max_id {max_id}: min_step was not kept");
}
