//! The scale tool's metrics recorder: it keeps the store-call metrics every
//! store opened with `workerid::open` records
//! (`workerid_store_operation_seconds`, `workerid_store_operation_errors_total`),
//! per store kind, in lock-free histograms: the renew latency and the
//! counts of a run's windows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use metrics::{
    Counter, CounterFn, Gauge, Histogram as MetricHistogram, HistogramFn, Key, KeyName, Metadata,
    SharedString, Unit,
};
use workerid::observe::{STORE_ERRORS, STORE_OPERATION_SECONDS};

use crate::histogram::{Histogram, Snapshot};

/// What the store calls of one store kind have counted so far.
#[derive(Debug, Default)]
pub struct Stats {
    /// Latency of every renewal (successful or not).
    pub renew: Histogram,
    /// Latency of every acquire.
    pub acquire: Histogram,
    renews: AtomicU64,
    renews_failed: AtomicU64,
    acquires: AtomicU64,
    acquires_failed: AtomicU64,
    releases: AtomicU64,
}

/// The counters at one instant; subtract two with [`Counters::since`].
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Renewals the store confirmed.
    pub renews_ok: u64,
    /// Renewals that failed (any error, a caller's timeout included).
    pub renews_failed: u64,
    /// Acquires that succeeded.
    pub acquires: u64,
    /// Acquires that failed.
    pub acquires_failed: u64,
    /// Releases sent.
    pub releases: u64,
    /// Renew latencies.
    pub renew: Snapshot,
    /// Acquire latencies.
    pub acquire: Snapshot,
}

impl Counters {
    /// What happened after `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            renews_ok: self.renews_ok - earlier.renews_ok,
            renews_failed: self.renews_failed - earlier.renews_failed,
            acquires: self.acquires - earlier.acquires,
            acquires_failed: self.acquires_failed - earlier.acquires_failed,
            releases: self.releases - earlier.releases,
            renew: self.renew.since(&earlier.renew),
            acquire: self.acquire.since(&earlier.acquire),
        }
    }
}

impl Stats {
    /// The counters now.
    pub fn counters(&self) -> Counters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (renews, renews_failed) = (get(&self.renews), get(&self.renews_failed));
        let (acquires, acquires_failed) = (get(&self.acquires), get(&self.acquires_failed));
        Counters {
            renews_ok: renews.saturating_sub(renews_failed),
            renews_failed,
            acquires: acquires.saturating_sub(acquires_failed),
            acquires_failed,
            releases: get(&self.releases),
            renew: self.renew.snapshot(),
            acquire: self.acquire.snapshot(),
        }
    }
}

/// The counts of the store kind named `system` (`redis`, `postgresql`, ...,
/// as `StoreKind::system_name` names it). The first call installs the
/// recorder for the process.
pub fn stats_for(system: &str) -> Arc<Stats> {
    static INSTALLED: LazyLock<bool> =
        LazyLock::new(|| metrics::set_global_recorder(Global(&RECORDER)).is_ok());
    if !*INSTALLED {
        tracing::warn!("another metrics recorder is installed: the store calls are not counted");
    }
    RECORDER.stats(system)
}

static RECORDER: LazyLock<ScaleRecorder> = LazyLock::new(ScaleRecorder::default);

#[derive(Debug, Default)]
struct ScaleRecorder {
    stores: RwLock<HashMap<String, Arc<Stats>>>,
}

impl ScaleRecorder {
    fn stats(&self, system: &str) -> Arc<Stats> {
        if let Some(stats) = self
            .stores
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(system)
        {
            return stats.clone();
        }
        let mut stores = self.stores.write().unwrap_or_else(|e| e.into_inner());
        stores.entry(system.to_owned()).or_default().clone()
    }

    /// The stats and the operation a store metric's key names.
    fn target(&self, key: &Key) -> Option<(Arc<Stats>, Operation)> {
        let label = |name: &str| key.labels().find(|l| l.key() == name).map(|l| l.value());
        let operation = match label("operation")? {
            "acquire" => Operation::Acquire,
            "renew" => Operation::Renew,
            "release" => Operation::Release,
            _ => return None,
        };
        Some((self.stats(label("store")?), operation))
    }
}

#[derive(Debug, Clone, Copy)]
enum Operation {
    Acquire,
    Renew,
    Release,
}

/// One operation's latency: every sample is a call.
struct Timed(Arc<Stats>, Operation);

impl HistogramFn for Timed {
    fn record(&self, seconds: f64) {
        let latency = Duration::try_from_secs_f64(seconds).unwrap_or(Duration::ZERO);
        let stats = &self.0;
        match self.1 {
            Operation::Acquire => {
                stats.acquire.record(latency);
                stats.acquires.fetch_add(1, Ordering::Relaxed);
            }
            Operation::Renew => {
                stats.renew.record(latency);
                stats.renews.fetch_add(1, Ordering::Relaxed);
            }
            Operation::Release => {
                stats.releases.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// One operation's failures.
struct Failed(Arc<Stats>, Operation);

impl CounterFn for Failed {
    fn increment(&self, n: u64) {
        let stats = &self.0;
        match self.1 {
            Operation::Acquire => stats.acquires_failed.fetch_add(n, Ordering::Relaxed),
            Operation::Renew => stats.renews_failed.fetch_add(n, Ordering::Relaxed),
            Operation::Release => 0,
        };
    }

    fn absolute(&self, _: u64) {}
}

/// The recorder as the facade holds it.
struct Global(&'static ScaleRecorder);

impl metrics::Recorder for Global {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        match self.0.target(key) {
            Some((stats, operation)) if key.name() == STORE_ERRORS => {
                Counter::from_arc(Arc::new(Failed(stats, operation)))
            }
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> MetricHistogram {
        match self.0.target(key) {
            Some((stats, operation)) if key.name() == STORE_OPERATION_SECONDS => {
                MetricHistogram::from_arc(Arc::new(Timed(stats, operation)))
            }
            _ => MetricHistogram::noop(),
        }
    }
}
