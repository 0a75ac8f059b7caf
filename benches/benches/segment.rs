//! Segment IDs in process: IDs per second on one thread when no refill is
//! due, and the slowest call while refills happen (the double buffer must
//! hide them). Store: SQLite on a temporary file, so a refill is a real
//! durable write.
//!
//! `cargo bench -p benches --bench segment`

use std::hint::black_box;
use std::time::{Duration, Instant};

use workerid_core::segment::{SegmentAllocator, SegmentOptions};
use workerid_sql::SqlStore;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("segments.db").display()
        );
        let store = SqlStore::connect(&url).await.expect("store");

        // No refill due: one segment larger than the run.
        let big = SegmentAllocator::new(
            store.clone(),
            SegmentOptions {
                min_step: 1 << 30,
                max_step: 1 << 30,
                ..SegmentOptions::default()
            },
        );
        big.create_tag("speed", 1, 1 << 30).await.expect("tag");
        let tag = big.tag("speed").expect("handle");
        tag.next_id().await.expect("first segment");
        let n = 200_000_000u64;
        let started = Instant::now();
        for _ in 0..n {
            black_box(tag.next_id().await.expect("id"));
        }
        let rate = n as f64 / started.elapsed().as_secs_f64();
        let mut local = tag.local(32).expect("batcher");
        let started = Instant::now();
        for _ in 0..n {
            black_box(local.next_id().await.expect("id"));
        }
        let local_rate = n as f64 / started.elapsed().as_secs_f64();
        let verdict = |r: f64| if r >= 100e6 { "met" } else { "MISSED" };
        println!("\n| segment IDs, one thread, no refill due | IDs per second | goal |");
        println!("| --- | --- | --- |");
        println!(
            "| TagHandle::next_id (shared handle, one atomic add per ID) | {:.1}M | ≥ 100M {} |",
            rate / 1e6,
            verdict(rate)
        );
        println!(
            "| LocalIds::next_id (batches of 32) | {:.1}M | ≥ 100M {} |",
            local_rate / 1e6,
            verdict(local_rate)
        );

        // Refills: segments of 10 000 IDs, so a refill every 10 000 calls.
        let small = SegmentAllocator::new(
            store,
            SegmentOptions {
                min_step: 10_000,
                max_step: 10_000,
                ..SegmentOptions::default()
            },
        );
        small.create_tag("refill", 1, 10_000).await.expect("tag");
        let tag = small.tag("refill").expect("handle");
        let mut samples = Vec::with_capacity(2_000_000);
        for _ in 0..2_000_000 {
            let t = Instant::now();
            black_box(tag.next_id().await.expect("id"));
            samples.push(t.elapsed());
            if samples.len() % 5_000 == 0 {
                // Let the background prefetch run, as a real service's idle moments do.
                tokio::task::yield_now().await;
            }
        }
        samples.sort();
        let median = samples[samples.len() / 2];
        let p999 = samples[samples.len() * 999 / 1000];
        let worst = *samples.last().unwrap_or(&Duration::ZERO);
        println!("\n| segment IDs across 200 refills (SQLite store) | median | p99.9 | slowest |");
        println!("| --- | --- | --- | --- |");
        println!("| TagHandle::next_id | {median:?} | {p999:?} | {worst:?} |");
    });
}
