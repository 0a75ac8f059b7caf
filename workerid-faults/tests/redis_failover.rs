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
//! acknowledged is lost over two failovers. The measurement of both
//! settings over many failovers is `bash scripts/soak-failover.sh`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workerid::segment::Tag;
use workerid::Namespace;
use workerid_faults::acknowledged::{churn_leases_until, reserve_until, Acknowledged, Answer};
use workerid_testkit::redis_sentinel::RedisSentinelGroup;

const TTL: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Load {
    acknowledged: Mutex<Acknowledged>,
    /// How long each acknowledged reservation took.
    latencies: Mutex<Vec<Duration>>,
    unavailable: AtomicU64,
    stop: AtomicBool,
}

impl Load {
    fn note(&self, answer: Answer) {
        match answer {
            Answer::Reserved(range, took) => {
                self.acknowledged.lock().unwrap().ranges.push(range);
                self.latencies.lock().unwrap().push(took);
            }
            Answer::Granted(grant) => self.acknowledged.lock().unwrap().grants.push(grant),
            Answer::Failed(..) => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
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
            let (load, segments, tag) = (load.clone(), store.segment_store(), tag.clone());
            tasks.push(tokio::spawn(async move {
                reserve_until(&load.stop, &*segments, &tag, Duration::ZERO, |a| {
                    load.note(a)
                })
                .await;
            }));
        }
        for _ in 0..2 {
            let (load, leases, namespace) = (load.clone(), store.lease_store(), namespace.clone());
            tasks.push(tokio::spawn(async move {
                let pool = (1023, TTL);
                churn_leases_until(
                    &load.stop,
                    &*leases,
                    &namespace,
                    pool,
                    Duration::ZERO,
                    |a| load.note(a),
                )
                .await;
            }));
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
                group.wait_until_replicated(Duration::from_secs(30));
            });
        }
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        load.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.expect("a load task");
        }
    });
    let acknowledged = load.acknowledged.lock().unwrap();
    let mut latencies = load.latencies.lock().unwrap().clone();
    latencies.sort_unstable();
    Failovers {
        wait_replicas,
        failovers,
        promotion,
        ranges: acknowledged.ranges.len(),
        grants: acknowledged.grants.len(),
        unavailable: load.unavailable.load(Ordering::Relaxed),
        repeated_segment_ids: acknowledged.repeated_segment_ids(),
        fences_gone_back: acknowledged.fences_gone_back(),
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
    let outcome = run(1, failovers_from_env(2));
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
