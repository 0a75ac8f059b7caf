//! A sequence-number workload on etcd: 500 tasks take 10
//! IDs each from one etcd node, 5000 IDs in all. Two ways in the same run:
//! `GaplessSequence` (one compare-and-swap transaction per ID, consecutive,
//! as etcd's STM recipe does) and the `SegmentAllocator` (ranges of 1000
//! reserved by the same transaction, IDs handed out from memory). Both must
//! hand out 5000 distinct IDs.
//!
//! `cargo bench -p benches --bench etcd_sequence` (starts its own etcd).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use workerid::etcd::EtcdStore;
use workerid::segment::{GaplessSequence, SegmentAllocator, SegmentOptions, SegmentStore, Tag};
use workerid_testkit::etcd::EtcdServer;

const TASKS: usize = 500;
const EACH: usize = 10;

/// Runs the workload with `next` and returns the wall time, after checking
/// that every ID is distinct.
async fn workload<F, Fut>(next: F) -> Duration
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = u64> + Send,
{
    let next = Arc::new(next);
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let next = next.clone();
            tokio::spawn(async move {
                let mut got = Vec::with_capacity(EACH);
                for _ in 0..EACH {
                    got.push(next().await);
                }
                got
            })
        })
        .collect();
    let mut all = HashSet::new();
    for task in tasks {
        for id in task.await.expect("task") {
            assert!(all.insert(id), "ID {id} handed out twice");
        }
    }
    let took = started.elapsed();
    assert_eq!(all.len(), TASKS * EACH);
    took
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let node = EtcdServer::start();
    rt.block_on(async {
        let store = EtcdStore::connect([node.endpoint()]).await.expect("etcd");
        let gapless_tag = Tag::new("bench-gapless").expect("tag");
        store.create_tag(&gapless_tag, 1, 1).await.expect("tag");
        let sequence = Arc::new(GaplessSequence::new(store.clone()));
        let gapless = workload(move || {
            let sequence = sequence.clone();
            async move { sequence.next_id("bench-gapless").await.expect("next") }
        })
        .await;
        let max = store.list_tags().await.expect("tags");
        let last = max.iter().find(|t| t.tag == gapless_tag).map(|t| t.max_id);
        assert_eq!(last, Some((TASKS * EACH) as u64), "consecutive: no hole");

        let segments = Arc::new(SegmentAllocator::new(store, SegmentOptions::default()));
        segments
            .create_tag("bench-segment", 1, 1000)
            .await
            .expect("tag");
        let from_segments = workload(move || {
            let segments = segments.clone();
            async move { segments.next_id("bench-segment").await.expect("next") }
        })
        .await;

        let n = (TASKS * EACH) as f64;
        benches::record::say(format!(
            "\n| {TASKS} tasks x {EACH} IDs, one etcd node | wall time | IDs per second |"
        ));
        benches::record::say("| --- | --- | --- |");
        for (name, took) in [
            ("GaplessSequence (one CAS transaction per ID)", gapless),
            ("SegmentAllocator (ranges of 1000)", from_segments),
        ] {
            benches::record::say(format!(
                "| {name} | {:.0} ms | {:.0} |",
                took.as_secs_f64() * 1e3,
                n / took.as_secs_f64()
            ));
        }
    });
    benches::record::record_transcript(
        "etcd_sequence",
        "cargo bench -p benches --bench etcd_sequence",
    );
}
