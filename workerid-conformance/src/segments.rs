//! The segment-store contract as scenarios ([`SegmentStore`]): go-id-alloc's
//! and Leaf's range rule, ranges that never overlap and have no holes, under
//! contention and across restarts, and give-backs that never let an ID out
//! twice.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use rand::Rng;
use tokio::sync::Barrier;
use workerid_segment::{Error, Range, SegmentAllocator, SegmentOptions, SegmentStore, Tag};

use crate::Outcome;

mod give_back;
pub use give_back::{
    give_back_only_when_untouched, replayed_give_back_is_refused,
    replayed_give_back_is_refused_after_a_versionless_reservation,
};

/// Makes handles on the segment store under test (like [`StoreFactory`](crate::StoreFactory)).
#[async_trait]
pub trait SegmentFactory: Send + Sync {
    /// A new handle on the store, with its own connection(s).
    async fn connect(&self) -> Arc<dyn SegmentStore>;

    /// Whether [`restart`](Self::restart) is supported.
    fn supports_restart(&self) -> bool {
        false
    }

    /// Restarts the store, keeping its data.
    async fn restart(&self) {
        panic!("this SegmentFactory does not support restart");
    }

    /// Reserves `step` IDs of `tag` beside the store, as a server that
    /// knows no version does (go-id-alloc's and Leaf's `UPDATE ... SET
    /// max_id = max_id + step`), on a store such servers can share (their
    /// SQL tables); returns whether it did. Default: false, and the
    /// scenario that needs it is skipped.
    async fn reserve_without_version(&self, tag: &Tag, step: u64) -> bool {
        let _ = (tag, step);
        false
    }
}

fn fresh_tag() -> Tag {
    let suffix: u32 = rand::rng().random();
    Tag::new(format!("conformance-{suffix:08x}")).expect("a valid tag")
}

fn ids(range: Range) -> impl Iterator<Item = u64> {
    range.first..=range.last
}

/// Reservations hand out consecutive ranges from the first ID, with the
/// default step or the one asked for.
pub async fn consecutive_ranges_without_holes(f: &dyn SegmentFactory) -> Outcome {
    let store = f.connect().await;
    let tag = fresh_tag();
    assert!(
        store.create_tag(&tag, 1, 100).await.expect("create"),
        "a new tag is created"
    );
    let a = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(
        (a.first, a.last),
        (1, 100),
        "the first range starts at the first ID, default step"
    );
    let b = store.reserve(&tag, Some(7)).await.expect("reserve");
    assert_eq!(
        (b.first, b.last),
        (101, 107),
        "the next range follows, with the step asked for"
    );
    if store.segment_capabilities().give_back {
        assert_ne!(
            a.version, b.version,
            "every reservation changes the version"
        );
    }
    let other = fresh_tag();
    store.create_tag(&other, 5_000, 10).await.expect("create");
    let c = store.reserve(&other, None).await.expect("reserve");
    assert_eq!((c.first, c.last), (5_000, 5_009));
    Outcome::Passed
}

/// Many tasks over several handles reserve at once: the ranges never overlap
/// and together cover every ID from the first.
pub async fn ranges_never_overlap_under_contention(f: &dyn SegmentFactory) -> Outcome {
    const TASKS: usize = 24;
    const EACH: usize = 10;
    let tag = fresh_tag();
    let mut handles = Vec::new();
    for _ in 0..4 {
        handles.push(f.connect().await);
    }
    handles[0].create_tag(&tag, 1, 10).await.expect("create");
    let barrier = Arc::new(Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (store, tag, barrier) = (handles[i % 4].clone(), tag.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let mut ranges = Vec::new();
                for j in 0..EACH {
                    ranges.push(
                        store
                            .reserve(&tag, Some(1 + ((i + j) % 5) as u64))
                            .await
                            .expect("reserve"),
                    );
                }
                ranges
            })
        })
        .collect();
    let mut seen = BTreeSet::new();
    for task in tasks {
        for range in task.await.expect("a task panicked") {
            for id in ids(range) {
                assert!(seen.insert(id), "ID {id} was reserved twice");
            }
        }
    }
    let top = *seen.last().expect("IDs");
    assert_eq!(
        seen.len() as u64,
        top,
        "the ranges have holes: {} IDs up to {top}",
        seen.len()
    );
    Outcome::Passed
}

/// A tag's `max_id` is the first ID not handed out yet, as go-id-alloc's and
/// Leaf's servers read it: created at the first ID, a reservation of `s`
/// takes `[max_id, max_id + s)`, a give-back sets it to the first unused ID.
/// A tag created at 0 (go-id-alloc's rows are) reserves from 0, and the
/// allocator never hands out ID 0.
pub async fn max_id_is_the_first_id_not_handed_out(f: &dyn SegmentFactory) -> Outcome {
    let store = f.connect().await;
    let listed_max = |tag: Tag| {
        let store = store.clone();
        async move {
            if !store.segment_capabilities().list {
                return None;
            }
            let listed = store
                .list_tags()
                .await
                .expect("list_tags, declared by SegmentCapabilities::list");
            let info = listed.into_iter().find(|t| t.tag == tag);
            Some(info.expect("the tag is listed").max_id)
        }
    };
    let tag = fresh_tag();
    store.create_tag(&tag, 1_000, 10).await.expect("create");
    if let Some(max) = listed_max(tag.clone()).await {
        assert_eq!(max, 1_000, "a new tag's max_id is its first ID");
    }
    let a = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!((a.first, a.last), (1_000, 1_009), "[max_id, max_id + step)");
    if let Some(max) = listed_max(tag.clone()).await {
        assert_eq!(max, 1_010, "after [1000, 1010) max_id is 1010");
    }
    let b = store.reserve(&tag, Some(5)).await.expect("reserve");
    assert_eq!(
        (b.first, b.last),
        (1_010, 1_014),
        "the next range starts at max_id"
    );
    if store.segment_capabilities().give_back {
        assert!(store.give_back(&tag, b, 1_012).await.expect("give back"));
        if let Some(max) = listed_max(tag.clone()).await {
            assert_eq!(max, 1_012, "a give-back sets max_id to the first unused ID");
        }
        let c = store.reserve(&tag, Some(1)).await.expect("reserve");
        assert_eq!((c.first, c.last), (1_012, 1_012));
    }
    let zero = fresh_tag();
    store.create_tag(&zero, 0, 3).await.expect("create at 0");
    let allocator = SegmentAllocator::new(store.clone(), SegmentOptions::default());
    let first = allocator.next_id(zero.as_str()).await.expect("next_id");
    assert_eq!(
        first, 1,
        "ID 0 is never handed out; the tag at 0 starts at 1"
    );
    allocator.shutdown().await;
    Outcome::Passed
}

/// An unknown tag is [`Error::UnknownTag`] for reserve and give-back; creating
/// an existing tag changes nothing; tags are listed (a store that declares
/// `list = false` answers `Unsupported` instead).
pub async fn unknown_tags_and_listing(f: &dyn SegmentFactory) -> Outcome {
    let store = f.connect().await;
    let tag = fresh_tag();
    let answer = store.reserve(&tag, None).await;
    assert!(
        matches!(answer, Err(Error::UnknownTag { .. })),
        "reserve of an unknown tag: {answer:?}"
    );
    let never = Range {
        first: 1,
        last: 10,
        version: 1,
    };
    for new_max in [5, never.end() + 1] {
        let answer = store.give_back(&tag, never, new_max).await;
        assert!(
            matches!(answer, Err(Error::UnknownTag { .. })),
            "give-back to {new_max} of an unknown tag: {answer:?} (an unknown tag is \
             reported whatever else is wrong with the call)"
        );
    }
    assert!(store.create_tag(&tag, 1, 50).await.expect("create"));
    store.reserve(&tag, None).await.expect("reserve");
    assert!(
        !store.create_tag(&tag, 1, 999).await.expect("create again"),
        "an existing tag is not created again"
    );
    if !store.segment_capabilities().list {
        let answer = store.list_tags().await;
        assert!(
            matches!(answer, Err(Error::Unsupported { .. })),
            "a store that declares list = false answers Unsupported: {answer:?}"
        );
        return Outcome::Passed;
    }
    let listed = store
        .list_tags()
        .await
        .expect("list_tags, declared by SegmentCapabilities::list");
    let info = listed
        .iter()
        .find(|t| t.tag == tag)
        .expect("the tag is listed");
    assert_eq!(
        (info.max_id, info.step),
        (51, 50),
        "creating it again changed nothing"
    );
    Outcome::Passed
}

/// Bad tags, steps and first IDs are refused before any I/O; nothing changes.
pub async fn bad_input_is_refused(f: &dyn SegmentFactory) -> Outcome {
    let allocator = SegmentAllocator::new(f.connect().await, SegmentOptions::default());
    let invalid = |r: Result<bool, Error>| matches!(r, Err(Error::InvalidConfig { .. }));
    for tag in ["", "has space", "x".repeat(33).as_str(), "a/b"] {
        assert!(
            invalid(allocator.create_tag(tag, 1, 10).await),
            "tag {tag:?}"
        );
    }
    let tag = fresh_tag();
    for (first, step) in [(1, 0), (1, (1 << 40) + 1), (0, 10), (u64::MAX, 10)] {
        assert!(
            invalid(allocator.create_tag(tag.as_str(), first, step).await),
            "first {first} step {step}"
        );
    }
    let store = f.connect().await;
    if store.segment_capabilities().list {
        let listed = store
            .list_tags()
            .await
            .expect("list_tags, declared by SegmentCapabilities::list");
        assert!(
            listed.iter().all(|t| t.tag != tag),
            "a refused tag must not be created"
        );
    } else {
        let answer = store.reserve(&tag, None).await;
        assert!(
            matches!(answer, Err(Error::UnknownTag { .. })),
            "a refused tag must not be created: {answer:?}"
        );
    }
    Outcome::Passed
}

/// Panics unless the reservations of one tag carry pairwise distinct
/// versions: the give-back compare depends on a version the tag never had
/// before, not on one that differs from the last only.
#[track_caller]
fn versions_never_repeat(ranges: &[Range]) {
    let mut seen = BTreeSet::new();
    for range in ranges {
        assert!(
            seen.insert(range.version),
            "version {} came again for the range {}..={}: every reservation changes the \
             version to a value the tag never had ({ranges:?})",
            range.version,
            range.first,
            range.last
        );
    }
}

/// A reservation whose new `max_id` would pass 2^63 − 1 is `TagExhausted`
/// and changes nothing: a smaller one still fits, right where the refused
/// one would have started, and so does the last ID below the limit.
pub async fn a_tag_at_its_end_is_exhausted(f: &dyn SegmentFactory) -> Outcome {
    const END: u64 = workerid_segment::MAX_SEGMENT_ID;
    let store = f.connect().await;
    let tag = fresh_tag();
    store
        .create_tag(&tag, END - 20, 10)
        .await
        .expect("create near the end");
    let a = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(
        (a.first, a.last),
        (END - 20, END - 11),
        "IDs near 2^63 are kept exactly"
    );
    let answer = store.reserve(&tag, Some(12)).await;
    assert!(
        matches!(answer, Err(Error::TagExhausted { .. })),
        "a range whose max_id would pass 2^63 - 1: {answer:?}"
    );
    if store.segment_capabilities().list {
        let listed = store
            .list_tags()
            .await
            .expect("list_tags, declared by SegmentCapabilities::list");
        let info = listed.iter().find(|t| t.tag == tag).expect("listed");
        assert_eq!(
            info.max_id,
            END - 10,
            "a refused reservation changes nothing"
        );
    }
    let b = store
        .reserve(&tag, None)
        .await
        .expect("a range that ends at the limit");
    assert_eq!(
        (b.first, b.last),
        (END - 10, END - 1),
        "the refused reservation changed nothing; max_id may reach 2^63 - 1"
    );
    for step in [None, Some(1), Some(1 << 40)] {
        let answer = store.reserve(&tag, step).await;
        assert!(
            matches!(answer, Err(Error::TagExhausted { .. })),
            "a tag whose max_id is 2^63 - 1, step {step:?}: {answer:?}"
        );
    }
    if store.segment_capabilities().give_back {
        versions_never_repeat(&[a, b]);
    }
    // A store keeps a tag at 2^63 - 1, exhausted; the allocator refuses to
    // make one whose first range cannot be reserved.
    let allocator = SegmentAllocator::new(store.clone(), SegmentOptions::default());
    let last = fresh_tag();
    for first_id in [END + 1, END, END - 9] {
        assert!(
            matches!(
                allocator.create_tag(last.as_str(), first_id, 10).await,
                Err(Error::InvalidConfig { .. })
            ),
            "a first ID of {first_id} with a step of 10 is refused"
        );
    }
    // A store may refuse such a tag as the allocator does (a server's, for
    // one); one that keeps it has no range to give from it.
    match store.create_tag(&last, END, 1).await {
        Ok(created) => {
            assert!(created, "a new tag at 2^63 - 1 is created");
            let answer = store.reserve(&last, None).await;
            assert!(
                matches!(answer, Err(Error::TagExhausted { .. })),
                "a tag at 2^63 - 1 has no range left: {answer:?}"
            );
        }
        Err(Error::InvalidConfig { .. }) => {}
        Err(e) => panic!("create at 2^63 - 1: {e:?}"),
    }
    Outcome::Passed
}

/// The allocator hands out distinct rising IDs from many tasks, and a
/// shutdown gives its unused tail back so the next allocator continues
/// right after the last ID used.
pub async fn allocator_hands_out_and_gives_back(f: &dyn SegmentFactory) -> Outcome {
    let tag = fresh_tag();
    let options = SegmentOptions {
        min_step: Some(10),
        max_step: 40,
        ..SegmentOptions::default()
    };
    let store = f.connect().await;
    let gives_back = store.segment_capabilities().give_back;
    let first = Arc::new(SegmentAllocator::new(store, options));
    first.create_tag(tag.as_str(), 1, 10).await.expect("create");
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (allocator, tag) = (first.clone(), tag.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..50 {
                    got.push(allocator.next_id(tag.as_str()).await.expect("next_id"));
                    tokio::task::yield_now().await;
                }
                got
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    for task in tasks {
        for id in task.await.expect("a task panicked") {
            assert!(all.insert(id), "ID {id} handed out twice");
        }
    }
    first.shutdown().await;
    let after = matches!(
        first.next_id(tag.as_str()).await,
        Err(Error::Stopped { .. })
    );
    assert!(after, "no IDs after shutdown");
    let second = SegmentAllocator::new(f.connect().await, options);
    let next = second.next_id(tag.as_str()).await.expect("next_id");
    let top = *all.last().expect("IDs");
    assert!(next > top, "an ID was handed out twice across allocators");
    if gives_back {
        assert_eq!(
            next,
            top + 1,
            "the unused tail was given back (no ID burnt)"
        );
    }
    Outcome::Passed
}

/// A durable store hands out no range twice across a restart.
pub async fn ranges_survive_a_restart(f: &dyn SegmentFactory) -> Outcome {
    let store = f.connect().await;
    if !store.segment_capabilities().durable {
        return Outcome::Skipped("the store's segments are not durable".into());
    }
    if !f.supports_restart() {
        return Outcome::Skipped("this factory cannot restart its store (it is shared)".into());
    }
    let tag = fresh_tag();
    store.create_tag(&tag, 1, 100).await.expect("create");
    let before = store.reserve(&tag, None).await.expect("reserve");
    f.restart().await;
    let after = f
        .connect()
        .await
        .reserve(&tag, None)
        .await
        .expect("reserve after restart");
    assert!(
        after.first > before.last,
        "a range was handed out again after a restart"
    );
    Outcome::Passed
}

/// Calls `$then!` (a macro of this crate) with its arguments followed by
/// the name of every segment scenario, in run order: the one list that
/// [`SEGMENT_SCENARIOS`] and
/// [`segment_store_tests!`](crate::segment_store_tests) are made from.
#[doc(hidden)]
#[macro_export]
macro_rules! __segment_scenarios {
    ($then:ident! { $($args:tt)* }) => {
        $crate::$then! { $($args)*
            consecutive_ranges_without_holes,
            max_id_is_the_first_id_not_handed_out,
            ranges_never_overlap_under_contention,
            unknown_tags_and_listing,
            bad_input_is_refused,
            give_back_only_when_untouched,
            replayed_give_back_is_refused,
            replayed_give_back_is_refused_after_a_versionless_reservation,
            a_tag_at_its_end_is_exhausted,
            allocator_hands_out_and_gives_back,
            ranges_survive_a_restart,
        }
    };
}

crate::__segment_scenarios!(__registry! {
    /// Every segment scenario, in run order.
    SEGMENT_SCENARIOS: dyn SegmentFactory;
});
