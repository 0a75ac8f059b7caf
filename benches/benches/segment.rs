//! Segment IDs in process: IDs per second on one thread when no refill is
//! due, and the slowest call while refills happen (the double buffer must
//! hide them). Store: SQLite on a temporary file, so a refill is a real
//! durable write.
//!
//! `cargo bench -p benches --bench segment`

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use benches::record::{record_transcript, say};
use workerid::segment::{
    Range, SegmentAllocator, SegmentOptions, SegmentStore, Tag, TagHandle, TagInfo,
};
use workerid::sql::SqlStore;

/// IDs per second of `threads` tasks on the runtime's worker threads, each
/// taking `n / threads` IDs of `tag` through its own clone of the handle,
/// or through a `LocalIds` of `batch` of its own.
async fn threads_rate(tag: &TagHandle, threads: u64, n: u64, batch: Option<u64>) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = (0..threads)
        .map(|_| {
            let tag = tag.clone();
            tokio::spawn(async move {
                match batch {
                    None => {
                        for _ in 0..n / threads {
                            black_box(tag.next_id().await.expect("id"));
                        }
                    }
                    Some(batch) => {
                        let mut local = tag.local(batch).expect("batcher");
                        for _ in 0..n / threads {
                            black_box(local.next_id().await.expect("id"));
                        }
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a task");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = workerid_testkit::sqlite_url(&dir.path().join("segments.db"));
        let store = SqlStore::connect(&url).await.expect("store");

        // No refill due: one segment larger than the run.
        let big = SegmentAllocator::new(
            store.clone(),
            SegmentOptions {
                min_step: Some(1 << 32),
                max_step: 1 << 32,
                ..SegmentOptions::default()
            },
        );
        big.create_tag("speed", 1, 1 << 32).await.expect("tag");
        let tag = big.tag("speed").expect("handle");
        tag.next_id().await.expect("first segment");
        // Five runs of 40M each: the median and the range (this VM's speed
        // swings by a third from one second to the next).
        let (runs, n) = (5, 40_000_000u64);
        // IDs per second of `runs` runs of `n` calls of `$call`.
        macro_rules! rates {
            ($call:expr) => {{
                let mut rates = Vec::new();
                for _ in 0..runs {
                    let started = Instant::now();
                    for _ in 0..n {
                        black_box($call.await.expect("id"));
                    }
                    rates.push(n as f64 / started.elapsed().as_secs_f64());
                }
                rates
            }};
        }
        let mut rates = rates!(tag.next_id());
        let mut local = tag.local(32).expect("batcher");
        let mut local_rates = rates!(local.next_id());
        let summary = |rates: &mut Vec<f64>| {
            rates.sort_by(f64::total_cmp);
            let median = rates[rates.len() / 2];
            let verdict = if median >= 100e6 { "met" } else { "MISSED" };
            format!(
                "{:.1}M | {:.1}M to {:.1}M | ≥ 100M {verdict}",
                median / 1e6,
                rates[0] / 1e6,
                rates[rates.len() - 1] / 1e6
            )
        };
        say(format!(
            "\n| segment IDs, one thread, no refill due \
             | IDs per second, median of {runs} | range | goal |"
        ));
        say("| --- | --- | --- | --- |");
        say(format!(
            "| TagHandle::next_id (shared handle, one atomic add per ID) | {} |",
            summary(&mut rates)
        ));
        say(format!(
            "| LocalIds::next_id (batches of 32) | {} |",
            summary(&mut local_rates)
        ));

        // Two threads on one tag against one thread, in the same runs,
        // taking turns: through clones of one handle (every ID one atomic
        // add on a shared cursor), and through a `LocalIds` batcher per
        // thread (one add per batch), with small batches and with the large
        // ones the docs recommend for several threads.
        say(format!(
            "\n| segment IDs on one tag | one thread, median of {runs} | two threads \
             | two vs one | goal |"
        ));
        say("| --- | --- | --- | --- | --- |");
        let handles = [
            ("TagHandle clones (shared cursor)", None),
            ("a LocalIds per thread (batches of 32)", Some(32)),
            ("a LocalIds per thread (batches of 1024)", Some(1024)),
        ];
        for (name, batch) in handles {
            let (mut one, mut two) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                one.push(threads_rate(&tag, 1, n, batch).await);
                two.push(threads_rate(&tag, 2, n, batch).await);
            }
            one.sort_by(f64::total_cmp);
            two.sort_by(f64::total_cmp);
            let (one, two) = (one[runs / 2], two[runs / 2]);
            let ratio = two / one;
            say(format!(
                "| {name} | {:.1}M | {:.1}M | {ratio:.2}x | ≥ 1.6x {} |",
                one / 1e6,
                two / 1e6,
                if ratio >= 1.6 { "met" } else { "MISSED" }
            ));
        }

        // Refills. Leaf's dynamic step (the allocator's default rule: double
        // the step while a segment lasts under 15 minutes) starting from
        // 10 000, so the first refills race the consumer as a cold start
        // does; the same number of calls on a segment with no refill due
        // gives the machine's own noise floor. A call's latency includes
        // one clock read (~50 ns here).
        let counting = Arc::new(Counting {
            inner: store.clone(),
            reserves: AtomicU64::new(0),
        });
        let dynamic = SegmentAllocator::new(
            counting.clone(),
            SegmentOptions {
                min_step: Some(10_000),
                ..SegmentOptions::default()
            },
        );
        dynamic.create_tag("refill", 1, 10_000).await.expect("tag");
        let refilling = dynamic.tag("refill").expect("handle");
        refilling.next_id().await.expect("first segment");
        let calls = 20_000_000;
        let loads_before = counting.reserves.load(Ordering::Relaxed);
        let with_refills = timed(&refilling, calls).await;
        let loads = counting.reserves.load(Ordering::Relaxed) - loads_before;
        let quiet = timed(&tag, calls).await;
        say(format!(
            "\n| segment IDs, {}M calls, SQLite store | median | p99.9 | p99.99 | slowest \
             | calls that waited for the store |",
            calls / 1_000_000
        ));
        say("| --- | --- | --- | --- | --- | --- |");
        say(format!(
            "| across {loads} refills (dynamic step from 10 000) | {with_refills} |"
        ));
        say(format!(
            "| no refill due (the machine's noise floor) | {quiet} |"
        ));
        record_transcript("segment", "cargo bench -p benches --bench segment");
    });
}

/// The store, counting reservations (each one a segment load).
#[derive(Debug)]
struct Counting {
    inner: SqlStore,
    reserves: AtomicU64,
}

#[async_trait]
impl SegmentStore for Counting {
    fn segment_capabilities(&self) -> workerid::segment::SegmentCapabilities {
        self.inner.segment_capabilities()
    }
    async fn create_tag(
        &self,
        tag: &Tag,
        first_id: u64,
        step: u64,
    ) -> workerid::segment::Result<bool> {
        self.inner.create_tag(tag, first_id, step).await
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> workerid::segment::Result<Range> {
        self.reserves.fetch_add(1, Ordering::Relaxed);
        self.inner.reserve(tag, step).await
    }
    async fn give_back(
        &self,
        tag: &Tag,
        reserved: Range,
        new_max: u64,
    ) -> workerid::segment::Result<bool> {
        self.inner.give_back(tag, reserved, new_max).await
    }
    async fn list_tags(&self) -> workerid::segment::Result<Vec<TagInfo>> {
        self.inner.list_tags().await
    }
}

/// `calls` timed calls of `next_id`: median, p99.9, p99.99 and the slowest
/// call (from a histogram: 10 ns buckets up to 100 µs, then the exact slow
/// calls), and the slowest of the calls that waited for the store.
async fn timed(handle: &TagHandle, calls: usize) -> String {
    const BUCKET_NS: u64 = 10;
    let mut buckets = vec![0u64; 10_000];
    let mut slow: Vec<Duration> = Vec::new();
    let mut stalled: Vec<Duration> = Vec::new();
    for _ in 0..calls {
        let stalls = handle.stalls();
        let t = Instant::now();
        black_box(handle.next_id().await.expect("id"));
        let took = t.elapsed();
        if handle.stalls() != stalls {
            stalled.push(took);
        }
        let bucket = usize::try_from(took.as_nanos() / u128::from(BUCKET_NS)).unwrap_or(usize::MAX);
        match buckets.get_mut(bucket) {
            Some(b) => *b += 1,
            None => slow.push(took),
        }
    }
    slow.sort();
    let at = |q: f64| -> Duration {
        let rank = ((calls as f64) * q) as u64;
        let mut seen = 0;
        for (i, n) in buckets.iter().enumerate() {
            seen += n;
            if seen > rank {
                return Duration::from_nanos((i as u64 + 1) * BUCKET_NS);
            }
        }
        let beyond = usize::try_from(rank - seen).unwrap_or(usize::MAX);
        slow.get(beyond).copied().unwrap_or_default()
    };
    let slowest = slow.last().copied().unwrap_or_else(|| {
        let top = buckets.iter().rposition(|n| *n > 0).unwrap_or(0) as u64;
        Duration::from_nanos((top + 1) * BUCKET_NS)
    });
    let waited = match stalled.iter().max() {
        Some(max) => format!("{} ({max:?} at most)", stalled.len()),
        None => "0".to_string(),
    };
    format!(
        "≤ {:?} | ≤ {:?} | ≤ {:?} | {slowest:?} | {waited}",
        at(0.5),
        at(0.999),
        at(0.9999)
    )
}
