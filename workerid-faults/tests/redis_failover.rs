//! Redis with a replica and three Sentinels, its master killed (SIGKILL)
//! under load again and again: the Sentinels promote the replica, the store
//! follows them (`redis+sentinel://`), and the killed server comes back as
//! the new master's replica. Replication is asynchronous: an acknowledged
//! write the replica had not received when the master died is gone after
//! the failover, and the checker counts what that broke (segment IDs
//! handed out twice, grants whose fence went back). With `wait_replicas=1`
//! every write waits for the replica before it is answered.
//!
//! The short test (in the test command) asserts that with the wait nothing
//! acknowledged is lost over three failovers. The measurement of both
//! settings over many failovers is `bash scripts/soak-failover.sh`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workerid::segment::{SegmentStore, Tag};
use workerid::{Holder, LeaseStore, Namespace, Token};
use workerid_testkit::redis_sentinel::RedisSentinelGroup;

const TTL: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
struct Acknowledged {
    /// Segment ranges: (first, last).
    ranges: Vec<(u64, u64)>,
    /// Grants in the order they were answered: (worker ID, fence).
    grants: Vec<(u32, u64)>,
    /// How long each acknowledged reservation took.
    latencies: Vec<Duration>,
}

#[derive(Default)]
struct Load {
    acknowledged: Mutex<Acknowledged>,
    unavailable: AtomicU64,
    stop: AtomicBool,
}

async fn reserve_loop(load: Arc<Load>, store: Arc<dyn SegmentStore>, tag: Tag) {
    while !load.stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        match store.reserve(&tag, None).await {
            Ok(range) => {
                let mut acknowledged = load.acknowledged.lock().unwrap();
                acknowledged.ranges.push((range.first, range.last));
                acknowledged.latencies.push(began.elapsed());
            }
            Err(_) => {
                load.unavailable.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

async fn lease_loop(load: Arc<Load>, store: Arc<dyn LeaseStore>, namespace: Namespace) {
    while !load.stop.load(Ordering::Relaxed) {
        let token = Token::generate();
        match store
            .acquire(&namespace, 1023, &token, TTL, &Holder::default())
            .await
        {
            Ok(grant) => {
                load.acknowledged
                    .lock()
                    .unwrap()
                    .grants
                    .push((grant.id.get(), grant.fence));
                let _ = store.release(&namespace, grant.id, &token, 0).await;
            }
            Err(_) => {
                load.unavailable.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// What a run broke and cost.
#[derive(Debug)]
struct Failovers {
    wait_replicas: u32,
    failovers: usize,
    /// From the kill until a server says it is the new master.
    promotion: Vec<Duration>,
    ranges: usize,
    grants: usize,
    unavailable: u64,
    /// Segment IDs in two acknowledged ranges.
    repeated_segment_ids: u64,
    /// Acknowledged grants whose fence was not above the previous
    /// acknowledged grant of the same worker ID (an earlier grant lost).
    fences_gone_back: usize,
    reserve_p50: Duration,
    reserve_p99: Duration,
}

impl Failovers {
    /// One paragraph for the record.
    fn summary(&self) -> String {
        let mut promotion = self.promotion.clone();
        promotion.sort_unstable();
        format!(
            "wait_replicas={}: {} failovers (promotion after the kill: median {:.2?}, worst \
             {:.2?}); {} ranges and {} grants acknowledged, {} calls Unavailable; {} segment IDs \
             handed out twice, {} grants whose fence went back; a reservation took {:.2?} p50, \
             {:.2?} p99",
            self.wait_replicas,
            self.failovers,
            percentile(&promotion, 0.5),
            promotion.last().copied().unwrap_or_default(),
            self.ranges,
            self.grants,
            self.unavailable,
            self.repeated_segment_ids,
            self.fences_gone_back,
            self.reserve_p50,
            self.reserve_p99,
        )
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

fn run(wait_replicas: u32, failovers: usize) -> Failovers {
    let group = RedisSentinelGroup::start();
    let url = format!("{}?durable=true&wait_replicas={wait_replicas}", group.url());
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let load = Arc::new(Load::default());
    let mut promotion = Vec::new();
    runtime.block_on(async {
        let options = workerid::OpenOptions::new()
            .request_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_millis(500));
        let store = options
            .open(&url)
            .await
            .expect("open through the Sentinels");
        let tag = Tag::new("failover").expect("tag");
        store
            .segment_store()
            .create_tag(&tag, 1, 10)
            .await
            .expect("create the tag");
        let namespace = Namespace::new("failover").expect("namespace");
        let mut tasks = Vec::new();
        for _ in 0..3 {
            tasks.push(tokio::spawn(reserve_loop(
                load.clone(),
                store.segment_store(),
                tag.clone(),
            )));
        }
        for _ in 0..2 {
            tasks.push(tokio::spawn(lease_loop(
                load.clone(),
                store.lease_store(),
                namespace.clone(),
            )));
        }
        for _ in 0..failovers {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let master =
                tokio::task::block_in_place(|| group.wait_for_master(Duration::from_secs(20)));
            group.servers()[master].process().kill();
            let killed = Instant::now();
            let promoted = tokio::task::block_in_place(|| {
                group.wait_for_failover(master, Duration::from_secs(30))
            });
            promotion.push(killed.elapsed());
            assert_ne!(promoted, master);
            tokio::task::block_in_place(|| {
                group.servers()[master].process().start();
                group.wait_for_replica(master, Duration::from_secs(30));
            });
        }
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        load.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.expect("a load task");
        }
    });
    let acknowledged = load.acknowledged.lock().unwrap();
    let mut ranges = acknowledged.ranges.clone();
    ranges.sort_unstable();
    let mut repeated = 0u64;
    let mut reach = 0u64;
    for &(first, last) in &ranges {
        if first <= reach {
            repeated += reach.min(last) - first + 1;
        }
        reach = reach.max(last);
    }
    let mut fences: BTreeMap<u32, u64> = BTreeMap::new();
    let mut gone_back = 0;
    for &(id, fence) in &acknowledged.grants {
        if fences.insert(id, fence).is_some_and(|last| fence <= last) {
            gone_back += 1;
        }
    }
    let mut latencies = acknowledged.latencies.clone();
    latencies.sort_unstable();
    Failovers {
        wait_replicas,
        failovers,
        promotion,
        ranges: ranges.len(),
        grants: acknowledged.grants.len(),
        unavailable: load.unavailable.load(Ordering::Relaxed),
        repeated_segment_ids: repeated,
        fences_gone_back: gone_back,
        reserve_p50: percentile(&latencies, 0.5),
        reserve_p99: percentile(&latencies, 0.99),
    }
}

fn failovers_from_env(default: usize) -> usize {
    std::env::var("WORKERID_FAILOVERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

#[test]
fn waiting_for_the_replica_loses_nothing_across_failovers() {
    let outcome = run(1, failovers_from_env(3));
    println!("{}", outcome.summary());
    assert!(outcome.ranges > 100 && outcome.grants > 100, "{outcome:#?}");
    assert_eq!(outcome.repeated_segment_ids, 0, "{outcome:#?}");
    assert_eq!(outcome.fences_gone_back, 0, "{outcome:#?}");
}

/// A measurement, not a check (asynchronous replication may or may not
/// lose a write in a given failover): `bash scripts/soak-failover.sh`.
#[test]
#[ignore = "a measurement over many failovers: bash scripts/soak-failover.sh"]
fn without_waiting_failovers_lose_acknowledged_writes() {
    let outcome = run(0, failovers_from_env(10));
    println!("{}", outcome.summary());
}
