//! A replicated store failed over again and again under load: segment
//! reservations and lease churn run against it while a test kills its
//! primary and lets the replica take over, and [`Acknowledged`] counts what
//! the failovers lost (segment IDs handed out twice, grants whose fence
//! went back) and what each reservation cost. Redis behind Sentinels
//! (`tests/redis_failover.rs`), a Redis Cluster with a replica per master
//! (`tests/redis_cluster_failover.rs`) and PostgreSQL with a promoted
//! standby (`tests/postgres_failover.rs`) run it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use workerid::segment::Tag;
use workerid::Namespace;

use crate::acknowledged::{churn_leases_until, reserve_until, Acknowledged, Answer};

/// The namespace the lease churn runs in, and the tag the reservations
/// take ranges of (a test that fails over the node holding their keys
/// finds them by these names).
pub const NAME: &str = "failover";

/// What a run broke and cost.
#[derive(Debug)]
pub struct Failovers {
    /// The store's setting that the run measures (`wait_replicas=1`, ...).
    pub setting: String,
    /// How many failovers.
    pub failovers: usize,
    /// From each kill until the new primary took writes.
    pub promotion: Vec<Duration>,
    /// Reservations acknowledged.
    pub ranges: usize,
    /// Grants acknowledged.
    pub grants: usize,
    /// Calls that failed (`Unavailable` while no primary answered).
    pub unavailable: u64,
    /// Segment IDs in two acknowledged ranges.
    pub repeated_segment_ids: u64,
    /// Acknowledged grants whose fence was not above the previous
    /// acknowledged grant of the same worker ID (an earlier grant lost).
    pub fences_gone_back: usize,
    /// A reservation's duration, median.
    pub reserve_p50: Duration,
    /// A reservation's duration, 99th percentile.
    pub reserve_p99: Duration,
}

impl Failovers {
    /// Asserts that the run did real work (over 100 reservations and
    /// grants acknowledged) and lost nothing acknowledged.
    ///
    /// # Panics
    /// When it did not, with the figures.
    pub fn assert_nothing_lost(&self) {
        assert!(self.ranges > 100 && self.grants > 100, "{self:#?}");
        assert_eq!(self.repeated_segment_ids, 0, "{self:#?}");
        assert_eq!(self.fences_gone_back, 0, "{self:#?}");
    }

    /// One paragraph for the record.
    pub fn summary(&self) -> String {
        let mut promotion = self.promotion.clone();
        promotion.sort_unstable();
        format!(
            "{}: {} failovers (a new primary after the kill: median {:.2?}, worst \
             {:.2?}); {} ranges and {} grants acknowledged, {} calls Unavailable; {} segment IDs \
             handed out twice, {} grants whose fence went back; a reservation took {:.2?} p50, \
             {:.2?} p99",
            self.setting,
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

#[derive(Default)]
struct Load {
    acknowledged: Mutex<Acknowledged>,
    latencies: Mutex<Vec<Duration>>,
    unavailable: AtomicU64,
    stop: AtomicBool,
}

impl Load {
    fn note(&self, answer: Answer) {
        let acknowledged = || {
            self.acknowledged
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        match answer {
            Answer::Reserved(range, call) => {
                acknowledged().ranges.push(range);
                self.latencies
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(call.took());
            }
            Answer::Granted(grant, _) => acknowledged().grants.push(grant),
            Answer::Failed(..) => {
                self.unavailable.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Opens `url` (`setting` names what it measures), runs three reserving and
/// two churning tasks against it (leases of `ttl` in a pool of 1024), and
/// calls `fail_over` `failovers` times, 1.5 s apart, from a blocking
/// section; `fail_over` kills the primary, waits until the store takes
/// writes again and returns how long that took after the kill.
///
/// # Panics
/// When the store cannot be opened or a load task panics.
pub fn measure(
    url: &str,
    setting: &str,
    ttl: Duration,
    failovers: usize,
    mut fail_over: impl FnMut() -> Duration,
) -> Failovers {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let load = Arc::new(Load::default());
    let mut promotion = Vec::new();
    runtime.block_on(async {
        let options = workerid::OpenOptions::new()
            .request_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_millis(500));
        let store = options.open(url).await.expect("open the store");
        let tag = Tag::new(NAME).expect("tag");
        store
            .segment_store()
            .create_tag(&tag, 1, 10)
            .await
            .expect("create the tag");
        let namespace = Namespace::new(NAME).expect("namespace");
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
                churn_leases_until(
                    &load.stop,
                    &*leases,
                    &namespace,
                    (1023, ttl),
                    Duration::ZERO,
                    |a| load.note(a),
                )
                .await;
            }));
        }
        for _ in 0..failovers {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            promotion.push(tokio::task::block_in_place(&mut fail_over));
        }
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        load.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.expect("a load task");
        }
    });
    let acknowledged = load
        .acknowledged
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut latencies = load
        .latencies
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    latencies.sort_unstable();
    Failovers {
        setting: setting.to_string(),
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

/// `WORKERID_FAILOVERS`, or `default`: how many failovers a run makes.
pub fn failovers_from_env(default: usize) -> usize {
    std::env::var("WORKERID_FAILOVERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}
