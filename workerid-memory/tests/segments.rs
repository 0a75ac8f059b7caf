//! The segment scenarios on the memory store, and the allocator's own
//! behaviour: double buffering, outages, gapless sequences.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use workerid_conformance::SegmentFactory;

use workerid_memory::MemoryStore;
use workerid_segment::{
    Error, GaplessSequence, Range, Result, SegmentAllocator, SegmentOptions, SegmentStore, Tag,
    TagInfo,
};

struct Shared(MemoryStore);

#[async_trait]
impl SegmentFactory for Shared {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.0.clone())
    }
}

workerid_conformance::segment_store_tests!(Shared(MemoryStore::new()));

#[test]
fn the_macro_runs_every_segment_scenario() {
    let all: Vec<&str> = workerid_conformance::segments::SEGMENT_SCENARIOS
        .iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(segment_conformance::SCENARIO_NAMES, all.as_slice());
}

/// A memory store that can go down.
#[derive(Debug)]
struct Outage {
    inner: MemoryStore,
    down: AtomicBool,
    /// Calls made while down.
    refused: AtomicU64,
    /// The step of every reservation asked for.
    steps: std::sync::Mutex<Vec<Option<u64>>>,
}

impl Outage {
    fn new() -> Self {
        Outage {
            inner: MemoryStore::new(),
            down: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            steps: Default::default(),
        }
    }

    fn check(&self) -> Result<()> {
        if self.down.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            Err(Error::unavailable("outage", "down"))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl SegmentStore for Outage {
    fn segment_capabilities(&self) -> workerid_segment::SegmentCapabilities {
        workerid_segment::SegmentCapabilities {
            durable: false,
            ..Default::default()
        }
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        self.check()?;
        self.inner.create_tag(tag, first_id, step).await
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        self.check()?;
        self.steps.lock().unwrap().push(step);
        self.inner.reserve(tag, step).await
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        self.check()?;
        self.inner.give_back(tag, reserved, new_max).await
    }
    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        self.check()?;
        self.inner.list_tags().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffers_keep_serving_through_an_outage_then_say_unavailable() {
    let store = Arc::new(Outage::new());
    let options = SegmentOptions {
        min_step: Some(100),
        max_step: 100,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    ids.create_tag("t", 1, 100).await.unwrap();
    let tag = ids.tag("t").unwrap();
    assert_eq!(tag.stalls(), 0);
    for _ in 0..20 {
        tag.next_id().await.unwrap(); // past 10 %: the next segment loads in the background
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tag.left() < 180 {
        assert!(
            std::time::Instant::now() < deadline,
            "the next segment was never prefetched"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        tag.left(),
        180,
        "the current segment's 80 and the prefetched 100"
    );
    store.down.store(true, Ordering::SeqCst);
    let mut served = 0;
    loop {
        match tag.next_id().await {
            Ok(_) => served += 1,
            Err(Error::Unavailable { .. }) => break,
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    assert_eq!(served, 180, "both buffers are served during the outage");
    assert_eq!(
        tag.stalls(),
        1,
        "only the first call waited: the switch to the prefetched segment did not, and a wait that failed is not counted"
    );
    // Nothing buffered and the store known to be down: answered at once,
    // without a store call, while a probe tries again in the background.
    let calls = store.refused.load(Ordering::SeqCst);
    for _ in 0..1_000 {
        assert!(matches!(
            tag.next_id().await,
            Err(Error::Unavailable { .. })
        ));
    }
    let probes = store.refused.load(Ordering::SeqCst) - calls;
    assert!(probes < 100, "1000 requests made {probes} store calls");
    assert!(tag.store_failing());
    assert!(matches!(tag.fill().await, Err(Error::Unavailable { .. })));
    store.down.store(false, Ordering::SeqCst);
    // The probe loads a segment within one probe interval (200 ms at most).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let back = loop {
        match tag.next_id().await {
            Ok(id) => break id,
            Err(Error::Unavailable { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(1)).await
            }
            Err(e) => panic!("the store is back, yet: {e}"),
        }
    };
    assert_eq!(
        back, 201,
        "allocation resumes; the loads that failed in the outage burnt no ID"
    );
    assert_eq!(tag.stalls(), 1, "the probe's segment was waiting: no stall");
    assert!(!tag.store_failing());
}

#[tokio::test]
async fn a_fill_hands_out_nothing_and_memory_serves_without_waiting() {
    let options = SegmentOptions {
        min_step: Some(100),
        max_step: 100,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(MemoryStore::new(), options);
    ids.create_tag("sync", 1, 100).await.unwrap();
    let tag = ids.tag("sync").unwrap();
    assert_eq!(tag.try_next_id(), None, "nothing loaded yet");
    assert_eq!(
        tag.fill().await.unwrap(),
        100,
        "a segment, no ID handed out"
    );
    assert_eq!(tag.fill().await.unwrap(), 100, "already there");
    assert_eq!(
        tag.try_next_id(),
        None,
        "the loaded segment waits for a switch"
    );
    assert_eq!(
        tag.next_id().await.unwrap(),
        1,
        "the switch, no wait for the store"
    );
    assert_eq!(tag.stalls(), 0);
    assert_eq!((tag.try_next_id(), tag.try_next_id()), (Some(2), Some(3)));
    assert_eq!(tag.left(), 97);
    let mut batch = tag.local(10).unwrap();
    for id in 4..14 {
        assert_eq!(batch.next_id().await.unwrap(), id, "one claim of 10");
    }
    assert_eq!(tag.try_next_id(), Some(14));
}

#[tokio::test]
async fn unknown_tags_asked_by_name_leave_nothing_in_memory() {
    let ids = SegmentAllocator::new(MemoryStore::new(), SegmentOptions::default());
    ids.create_tag("known", 1, 10).await.unwrap();
    ids.next_id("known").await.unwrap();
    for i in 0..100 {
        let name = format!("made-up-{i}");
        assert!(matches!(
            ids.next_id(&name).await,
            Err(Error::UnknownTag { .. })
        ));
        assert!(ids.existing(&name).unwrap().is_none());
    }
    assert_eq!(
        ids.tags_in_memory()
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>(),
        ["known"]
    );
    assert_eq!(
        ids.stalls(),
        1,
        "waits that ended in UnknownTag are not stalls"
    );
    // A handle somebody holds is never dropped from under them: it still
    // shuts down with the allocator.
    let held = ids.tag("held").unwrap();
    assert!(ids.next_id("held").await.is_err());
    assert!(ids.existing("held").unwrap().is_some());
    ids.create_tag("held", 1, 10).await.unwrap();
    assert_eq!(held.next_id().await.unwrap(), 1);
    assert_eq!(ids.next_id("held").await.unwrap(), 2, "one handle, shared");
    // A tag created after it was asked for works from then on.
    assert!(ids.next_id("late").await.is_err());
    ids.create_tag("late", 5, 10).await.unwrap();
    assert_eq!(ids.next_id("late").await.unwrap(), 5);
    assert!(ids.existing("late").unwrap().is_some());
    ids.shutdown().await;
    assert!(matches!(held.next_id().await, Err(Error::Stopped { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_doubles_when_segments_go_fast() {
    let store = MemoryStore::new();
    let options = SegmentOptions {
        min_step: Some(10),
        max_step: 80,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    ids.create_tag("fast", 1, 10).await.unwrap();
    for _ in 0..500 {
        ids.next_id("fast").await.unwrap();
    }
    let info = store
        .list_tags()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.tag.as_str() == "fast")
        .unwrap();
    let reserved = info.max_id - 1;
    // 10, then 20, 40, 80, 80, ...: far fewer reservations than with a fixed step of 10.
    assert!(
        (500..500 + 2 * 80).contains(&reserved),
        "reserved up to {reserved}"
    );
}

/// The step follows how long each segment lasted, measured from when that
/// segment was loaded, not from when the tag was first used: a tag idle for
/// a while and then used fast still grows its step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_follows_each_segment_not_the_tags_age() {
    let store = Arc::new(Outage::new());
    let options = SegmentOptions {
        min_step: Some(10),
        max_step: 80,
        grow_below: Duration::from_millis(150),
        shrink_above: Duration::from_secs(3600),
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    assert_eq!(ids.stalls(), 0, "no call yet, no stall");
    ids.create_tag("idle", 1, 10).await.unwrap();
    ids.next_id("idle").await.unwrap();
    assert_eq!(ids.stalls(), 1, "the first call waits for the store");
    tokio::time::sleep(Duration::from_millis(400)).await;
    for _ in 0..500 {
        ids.next_id("idle").await.unwrap();
    }
    let steps = store.steps.lock().unwrap().clone();
    assert!(
        steps.contains(&Some(80)),
        "segments used in microseconds double the step up to its largest: {steps:?}"
    );
}

/// Segments that last longer than `shrink_above` halve the step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_halves_when_segments_last_long() {
    let store = Arc::new(Outage::new());
    let options = SegmentOptions {
        min_step: Some(10),
        max_step: 80,
        grow_below: Duration::ZERO,
        shrink_above: Duration::from_millis(30),
        // The next segment loads when 90 % of the current one is used, so
        // how long a segment lasted is nearly all of its use.
        refill_at: 0.9,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    ids.create_tag("slow", 1, 80).await.unwrap();
    for _ in 0..200 {
        ids.next_id("slow").await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let steps: Vec<u64> = store
        .steps
        .lock()
        .unwrap()
        .iter()
        .flatten()
        .copied()
        .collect();
    // The first load keeps the tag's step (nothing measured yet); each
    // later one halves it.
    assert_eq!(steps, [80, 40, 20], "halved each time");
}

/// Step bounds past the largest step a store reserves are held to it: a
/// `min_step` of `u64::MAX` reserves `MAX_STEP` IDs, not a step every store
/// refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_past_the_stores_largest_are_held_to_it() {
    let store = Arc::new(Outage::new());
    let options = SegmentOptions {
        min_step: Some(u64::MAX),
        max_step: u64::MAX,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    ids.create_tag("wide", 1, 10).await.unwrap();
    for expected in 1..=20 {
        assert_eq!(ids.next_id("wide").await.unwrap(), expected);
    }
    let steps = store.steps.lock().unwrap().clone();
    assert_eq!(steps, [None, Some(workerid_segment::MAX_STEP)]);
}

/// A prefetch that finds the store down puts the tag in outage mode while
/// its current segment still has IDs: those are still served, and a fill
/// (a health check) answers them rather than the outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_prefetch_leaves_the_current_segment_served() {
    let store = Arc::new(Outage::new());
    let ids = SegmentAllocator::new(store.clone(), SegmentOptions::default());
    ids.create_tag("half", 1, 100).await.unwrap();
    let tag = ids.tag("half").unwrap();
    tag.next_id().await.unwrap();
    store.down.store(true, Ordering::SeqCst);
    for _ in 0..19 {
        tag.next_id().await.unwrap(); // past 10 %: the prefetch fails
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !tag.store_failing() {
        assert!(std::time::Instant::now() < deadline, "no prefetch failed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(tag.fill().await.unwrap(), 80);
    assert_eq!(tag.next_id().await.unwrap(), 21);
}

/// Once the store answers again, the probe loads a segment by itself: the
/// outage ends without a caller asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_ends_an_outage_by_itself() {
    let store = Arc::new(Outage::new());
    let ids = SegmentAllocator::new(store.clone(), SegmentOptions::default());
    ids.create_tag("probed", 1, 10).await.unwrap();
    let tag = ids.tag("probed").unwrap();
    store.down.store(true, Ordering::SeqCst);
    assert!(matches!(
        tag.next_id().await,
        Err(Error::Unavailable { .. })
    ));
    assert!(tag.store_failing());
    store.down.store(false, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tag.store_failing() || tag.left() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no segment loaded by the probe"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(tag.left(), 10);
    assert_eq!(
        tag.next_id().await.unwrap(),
        1,
        "the failed loads burnt no ID"
    );
}

/// A shutdown gives back what was not handed out: the next reservation
/// starts at the first ID nobody got, whether a prefetched segment follows
/// the current one or not, and a prefetched segment that another
/// allocator's reservation separates from the current one goes back alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_gives_back_what_was_not_handed_out() {
    let options = SegmentOptions {
        min_step: Some(100),
        max_step: 100,
        ..SegmentOptions::default()
    };
    // (IDs taken before and after another allocator reserves, the next first ID)
    for (before, after, next) in [(5, 0, 6), (20, 0, 21), (100, 0, 101), (5, 15, 201)] {
        let store = MemoryStore::new();
        let tag = Tag::new("tail").unwrap();
        let ours = SegmentAllocator::new(store.clone(), options);
        ours.create_tag("tail", 1, 100).await.unwrap();
        for _ in 0..before {
            ours.next_id("tail").await.unwrap();
        }
        if after > 0 {
            let theirs = SegmentAllocator::new(store.clone(), options);
            assert_eq!(theirs.next_id("tail").await.unwrap(), 101);
            for _ in 0..after {
                ours.next_id("tail").await.unwrap();
            }
        }
        let handle = ours.tag("tail").unwrap();
        let buffered = 100 - (before + after) + if before + after >= 10 { 100 } else { 0 };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while handle.left() != buffered {
            assert!(std::time::Instant::now() < deadline, "never prefetched");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        ours.shutdown().await;
        let first = store.reserve(&tag, Some(1)).await.unwrap().first;
        assert_eq!(
            first, next,
            "{before} taken, {after} after another reserved"
        );
        // Stopped for good, for the tag it served and for a new one.
        ours.create_tag("other", 1, 100).await.unwrap();
        for tag in ["tail", "other"] {
            let answer = ours.next_id(tag).await;
            assert!(
                matches!(answer, Err(Error::Stopped { .. })),
                "{tag}: {answer:?}"
            );
        }
    }
}

#[tokio::test]
async fn gapless_sequences_are_consecutive() {
    let store = MemoryStore::new();
    store
        .create_tag(&Tag::new("invoice").unwrap(), 1_000, 1)
        .await
        .unwrap();
    let seq = GaplessSequence::new(store);
    let got: Vec<u64> = futures_collect(&seq).await;
    assert_eq!(got, (1_000..1_010).collect::<Vec<_>>());
    assert!(matches!(
        seq.next_id("nope").await,
        Err(Error::UnknownTag { .. })
    ));
}

async fn futures_collect(seq: &GaplessSequence) -> Vec<u64> {
    let mut got = Vec::new();
    for _ in 0..10 {
        got.push(seq.next_id("invoice").await.unwrap());
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batchers_on_many_tasks_never_share_an_id() {
    let options = SegmentOptions {
        min_step: Some(50),
        max_step: 50,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(MemoryStore::new(), options);
    ids.create_tag("batched", 1, 50).await.unwrap();
    let tag = ids.tag("batched").unwrap();
    assert!(tag.local(0).is_err(), "a batch of 0 is refused");
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let mut local = tag.local(1 + i % 7).unwrap();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..1_000 {
                    got.push(local.next_id().await.unwrap());
                }
                got
            })
        })
        .collect();
    let mut all = std::collections::BTreeSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(all.insert(id), "ID {id} handed out twice");
        }
    }
    assert_eq!(all.len(), 8_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_what_as_many_single_calls_would_get() {
    let store = MemoryStore::new();
    let options = SegmentOptions {
        min_step: Some(100),
        max_step: 100,
        ..SegmentOptions::default()
    };
    let ids = SegmentAllocator::new(store.clone(), options);
    // At 0, as go-id-alloc's rows are.
    store
        .create_tag(&Tag::new("batch").unwrap(), 0, 100)
        .await
        .unwrap();
    let first = ids.next_id("batch").await.unwrap();
    assert_eq!(first, 1, "ID 0 is never handed out");
    let runs = ids.next_ids("batch", 450).await.unwrap();
    let got: Vec<u64> = runs.iter().flat_map(|r| r.clone()).collect();
    assert_eq!(
        got,
        (2..452).collect::<Vec<_>>(),
        "consecutive across segments"
    );
    assert_eq!(runs.len(), 1, "adjacent runs are merged: {runs:?}");
    assert_eq!(ids.next_id("batch").await.unwrap(), 452);
    for bad in [0, (1 << 32) + 1] {
        assert!(matches!(
            ids.next_ids("batch", bad).await,
            Err(Error::InvalidConfig { .. })
        ));
    }
    assert_eq!(
        ids.next_id("batch").await.unwrap(),
        453,
        "a refused batch takes nothing"
    );
    assert!(matches!(
        ids.next_ids("nope", 3).await,
        Err(Error::UnknownTag { .. })
    ));
    assert!(
        ids.existing("nope").unwrap().is_none(),
        "no handle kept for an unknown tag"
    );
}

#[tokio::test]
async fn a_give_back_of_nothing_is_accepted_and_changes_nothing() {
    let store = MemoryStore::new();
    let tag = Tag::new("tail").unwrap();
    store.create_tag(&tag, 1, 10).await.unwrap();
    let range = store.reserve(&tag, None).await.unwrap();
    assert!(store.give_back(&tag, range, range.end()).await.unwrap());
    assert_eq!(store.reserve(&tag, None).await.unwrap().first, range.end());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_across_segments_another_allocator_took_between_has_two_runs() {
    let store = MemoryStore::new();
    let options = SegmentOptions {
        min_step: Some(100),
        max_step: 100,
        ..SegmentOptions::default()
    };
    let a = SegmentAllocator::new(store.clone(), options);
    let b = SegmentAllocator::new(store.clone(), options);
    a.create_tag("shared", 1, 100).await.unwrap();
    assert_eq!(a.next_id("shared").await.unwrap(), 1);
    assert_eq!(b.next_id("shared").await.unwrap(), 101);
    let runs = a.next_ids("shared", 150).await.unwrap();
    assert_eq!(runs, vec![2..101, 201..252], "B's segment lies between");
}
