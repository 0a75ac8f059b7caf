//! The measurement: a ramp of worker counts on one store, each step a steady
//! window and then a churn window, with the checks that decide whether the
//! store held that many workers.

use std::time::{Duration, Instant};

use crate::fleet::{Fleet, FleetConfig};
use crate::procfs::{self, Reading};
use crate::recorded::Counters;
use crate::stores::Target;
use crate::Error;

/// How a scale run goes. [`Settings::default`] is the full run of the README.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The lease ttl; workers renew every ttl/3.
    pub ttl: Duration,
    /// The steady window of each step (rounded up to whole renew periods, so
    /// that each worker renews the same number of times in it).
    pub steady: Duration,
    /// The churn window of each step (zero: no churn).
    pub churn: Duration,
    /// The share of the workers stopped and joined again each churn cycle.
    pub churn_fraction: f64,
    /// How often a churn cycle starts.
    pub churn_every: Duration,
    /// Bits of a worker ID: each namespace holds 2^bits IDs.
    pub worker_bits: u8,
    /// The share of each namespace's IDs held by live workers (the rest is
    /// headroom: the ID of a worker whose lease lapsed stays taken until it
    /// expires, and joins must not run out of IDs meanwhile).
    pub fill: f64,
    /// Joins and stops in flight at once.
    pub concurrency: usize,
    /// Spread each step's joins over one renew period (as independent
    /// processes start), so renewals are spread too; false: join as fast as
    /// possible (one process starting all its workers at once, whose
    /// renewals then come in a burst every period).
    pub spread_joins: bool,
    /// A step whose renewals per second fall under this share of
    /// workers / (ttl / 3) has fallen behind.
    pub behind_below: f64,
    /// How far ahead each worker reserves time, in renew periods (`None`:
    /// the worker's default, which raises the stored watermark on one
    /// renewal in three; 2 raises it on every one).
    pub window_periods: Option<u32>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            ttl: Duration::from_secs(10),
            steady: Duration::from_secs(20),
            churn: Duration::from_secs(12),
            churn_fraction: 0.1,
            churn_every: Duration::from_secs(3),
            worker_bits: 10,
            fill: 0.5,
            concurrency: 32,
            spread_joins: true,
            behind_below: 0.9,
            window_periods: None,
        }
    }
}

impl Settings {
    /// The renew period: ttl / 3, as the workers' keepers use.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// Workers per namespace.
    pub fn per_namespace(&self) -> usize {
        let pool = 1usize << self.worker_bits.min(22);
        ((pool as f64 * self.fill).floor() as usize).clamp(1, pool)
    }
}

/// Measurements over one window.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Its length.
    pub elapsed: Duration,
    /// Renewals the store confirmed.
    pub renews: u64,
    /// Renewals the store confirmed, per second.
    pub renews_per_sec: f64,
    /// Renewals that failed (each retried by its worker).
    pub renew_failures: u64,
    /// Renew latency, median.
    pub p50: Duration,
    /// Renew latency, 99th percentile.
    pub p99: Duration,
    /// Renew latency, slowest.
    pub max: Duration,
    /// The store's server processes: CPU in % of one core (none for an
    /// embedded store, whose work is in the client's figure).
    pub store_cpu: Option<f64>,
    /// The store's server processes: memory in bytes at the window's end.
    pub store_memory: Option<u64>,
    /// Disk syncs the store's servers counted in the window (none where the
    /// store keeps no count, see [`crate::syncs`]).
    pub disk_syncs: Option<u64>,
    /// This process (every worker, and an embedded store): CPU in % of one core.
    pub client_cpu: f64,
    /// Workers found lost in the window.
    pub lapses: u64,
    /// The machine's 1-minute load average at the window's end (2 cores
    /// shared with other work: above 2, everything waits for a CPU).
    pub load: f64,
}

/// The churn part of a step.
#[derive(Debug, Clone, Default)]
pub struct Churn {
    /// The window's measurements.
    pub window: Window,
    /// Churn cycles run.
    pub cycles: usize,
    /// Workers stopped, in all.
    pub stopped: usize,
    /// Workers joined in their place.
    pub joined: usize,
    /// Joins that failed.
    pub join_failures: u64,
    /// Mean time to stop one cycle's workers (the joins then run in the
    /// background, overlapping the next cycles).
    pub mean_stop: Duration,
    /// Join latency (acquire, wait past the previous holder's watermark,
    /// first renewal), median.
    pub join_p50: Duration,
    /// Join latency, 99th percentile.
    pub join_p99: Duration,
}

/// One step of the ramp: `workers` live at once.
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// Workers asked for.
    pub workers: usize,
    /// Workers ready when the steady window began.
    pub live: usize,
    /// Namespaces they are spread over.
    pub namespaces: usize,
    /// How long growing to this count took.
    pub join_time: Duration,
    /// Joins that failed while growing.
    pub join_failures: u64,
    /// Workers lost while growing and settling, before the steady window.
    pub join_lapses: u64,
    /// workers / (ttl / 3).
    pub expected_renews_per_sec: f64,
    /// Client memory (RSS growth since before the first worker) per live worker.
    pub client_bytes_per_worker: f64,
    /// The steady window.
    pub steady: Window,
    /// The churn window, when there was one.
    pub churn: Option<Churn>,
    /// Renewals per second fell behind `behind_below` of the expected rate.
    pub behind: bool,
    /// The first few reasons workers gave for losing their lease, and join
    /// errors, since the ramp began.
    pub reasons: Vec<String>,
}

impl Step {
    /// Every worker joined and kept its lease, and renewals kept up.
    pub fn held(&self) -> bool {
        let churn_ok = self
            .churn
            .as_ref()
            .is_none_or(|c| c.window.lapses == 0 && c.join_failures == 0);
        self.join_lapses == 0
            && self.steady.lapses == 0
            && self.join_failures == 0
            && !self.behind
            && churn_ok
    }
}

/// Everything read at one instant: the basis of a [`Window`].
struct Mark {
    counters: Counters,
    server: Option<Reading>,
    syncs: Option<u64>,
    client: Reading,
    lapses: u64,
}

impl Mark {
    async fn take(target: &Target, fleet: &Fleet) -> Mark {
        let syncs = target.disk_syncs().await;
        Mark {
            counters: target.stats().counters(),
            server: target.server_pids().map(|pids| procfs::read(&pids)),
            syncs,
            client: procfs::read_self(),
            lapses: fleet.lapses,
        }
    }

    fn window_to(&self, end: &Mark) -> Window {
        let counts = end.counters.since(&self.counters);
        let elapsed = end.client.elapsed_since(&self.client);
        let secs = elapsed.as_secs_f64().max(1e-9);
        let (store_cpu, store_memory) = match (&self.server, &end.server) {
            (Some(a), Some(b)) => (Some(b.cpu_percent_since(a)), Some(b.memory)),
            _ => (None, None),
        };
        Window {
            elapsed,
            renews: counts.renews_ok,
            renews_per_sec: counts.renews_ok as f64 / secs,
            renew_failures: counts.renews_failed,
            p50: counts.renew.quantile(0.5),
            p99: counts.renew.quantile(0.99),
            max: counts.renew.quantile(1.0),
            store_cpu,
            store_memory,
            disk_syncs: end.syncs.zip(self.syncs).map(|(b, a)| b.saturating_sub(a)),
            client_cpu: end.client.cpu_percent_since(&self.client),
            lapses: end.lapses - self.lapses,
            load: procfs::load_average(),
        }
    }
}

/// Runs the ramp on `target`: grows the fleet to each count of `counts` in
/// turn (ascending), measures, and stops after the first step the store did
/// not hold. Calls `on_step` after each step. Stops every worker at the end.
///
/// # Errors
/// [`Error::Config`] for settings the store refuses.
pub async fn ramp(
    target: &Target,
    counts: &[usize],
    settings: &Settings,
    mut on_step: impl FnMut(&Step),
) -> Result<Vec<Step>, Error> {
    let mut counts = counts.to_vec();
    counts.sort_unstable();
    counts.dedup();
    let max = counts.last().copied().unwrap_or(0);
    let namespaces = max.div_ceil(settings.per_namespace()).max(1);
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let config = FleetConfig {
        ttl: settings.ttl,
        worker_bits: settings.worker_bits,
        namespaces,
        per_namespace: settings.per_namespace(),
        prefix: format!("scale{unique}"),
        concurrency: settings.concurrency,
        window_periods: settings.window_periods,
    };
    let mut fleet = Fleet::new(target.shared(), &config)?;
    // An earlier store's run in this process freed its workers, but their
    // pages stay resident until trimmed.
    procfs::release_free_memory();
    let baseline = procfs::own_rss();
    let mut steps = Vec::new();
    for workers in counts {
        let in_use = workers
            .div_ceil(settings.per_namespace())
            .clamp(1, namespaces);
        let step = step(target, &mut fleet, workers, in_use, baseline, settings).await;
        on_step(&step);
        let held = step.held();
        steps.push(step);
        if !held {
            break;
        }
    }
    fleet.stop_all().await;
    Ok(steps)
}

async fn step(
    target: &Target,
    fleet: &mut Fleet,
    workers: usize,
    namespaces: usize,
    baseline: u64,
    settings: &Settings,
) -> Step {
    let (failures, lapses) = (fleet.join_failures, fleet.lapses);
    let join_time = if settings.spread_joins {
        fleet.grow_spread(workers, settings.renew_every()).await
    } else {
        fleet.grow_to(workers).await
    };
    let join_failures = fleet.join_failures - failures;
    // Settle: every worker renews once after the joins, at its own pace.
    tokio::time::sleep(settings.renew_every() + Duration::from_secs(1)).await;
    fleet.scan_lapses();
    let join_lapses = fleet.lapses - lapses;
    let live = fleet.ready();
    let client_bytes_per_worker =
        procfs::own_rss().saturating_sub(baseline) as f64 / live.max(1) as f64;
    let expected = live as f64 / settings.renew_every().as_secs_f64();

    let periods = (settings.steady.as_secs_f64() / settings.renew_every().as_secs_f64())
        .ceil()
        .max(1.0);
    let mut steady = steady_window(target, fleet, settings, periods).await;
    let mut behind = steady.renews_per_sec < expected * settings.behind_below;
    if behind && steady.lapses == 0 && join_lapses == 0 {
        // The machine is shared: a slow spell of other work can hold the
        // renewals back for a while. Measure once more before calling it.
        steady = steady_window(target, fleet, settings, periods).await;
        behind = steady.renews_per_sec < expected * settings.behind_below;
    }

    let churn = if settings.churn.is_zero() || steady.lapses > 0 || join_lapses > 0 || behind {
        None
    } else {
        Some(churn(target, fleet, settings).await)
    };
    Step {
        workers,
        live,
        namespaces,
        join_time,
        join_failures,
        join_lapses,
        expected_renews_per_sec: expected,
        client_bytes_per_worker,
        steady,
        churn,
        behind,
        reasons: fleet
            .lapse_reasons
            .iter()
            .chain(&fleet.join_errors)
            .cloned()
            .collect(),
    }
}

/// One steady window of `periods` renew periods.
async fn steady_window(
    target: &Target,
    fleet: &mut Fleet,
    settings: &Settings,
    periods: f64,
) -> Window {
    let begin = Mark::take(target, fleet).await;
    tokio::time::sleep(settings.renew_every().mul_f64(periods)).await;
    fleet.scan_lapses();
    begin.window_to(&Mark::take(target, fleet).await)
}

async fn churn(target: &Target, fleet: &mut Fleet, settings: &Settings) -> Churn {
    let n = fleet.len();
    let per_cycle = ((n as f64 * settings.churn_fraction).ceil() as usize).clamp(1, n.max(1));
    let (failures, joined) = (fleet.join_failures, fleet.joined);
    let joins_before = fleet.joins.snapshot();
    let begin = Mark::take(target, fleet).await;
    let end = Instant::now() + settings.churn;
    let mut report = Churn::default();
    let mut stopping = Duration::ZERO;
    let mut offset = 0;
    loop {
        let tick = Instant::now();
        let cycle = fleet.churn(offset..offset + per_cycle).await;
        stopping += cycle.stop_time;
        report.cycles += 1;
        report.stopped += cycle.stopped;
        offset += per_cycle;
        if offset >= n {
            offset = 0;
        }
        fleet.scan_lapses();
        let next = tick + settings.churn_every;
        if next >= end {
            break;
        }
        tokio::time::sleep_until(next.into()).await;
    }
    // The last cycle's joins finish inside the window.
    fleet.settle().await;
    fleet.scan_lapses();
    report.window = begin.window_to(&Mark::take(target, fleet).await);
    report.joined = usize::try_from(fleet.joined - joined).unwrap_or(usize::MAX);
    report.join_failures = fleet.join_failures - failures;
    report.mean_stop = stopping / u32::try_from(report.cycles.max(1)).unwrap_or(u32::MAX);
    let joins = fleet.joins.snapshot().since(&joins_before);
    report.join_p50 = joins.quantile(0.5);
    report.join_p99 = joins.quantile(0.99);
    // Joins that failed leave empty slots: fill them for the next step.
    fleet.grow_to(n).await;
    report
}
