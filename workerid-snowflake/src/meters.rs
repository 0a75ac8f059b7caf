//! The snowflake crate's metric handles, taken once per generator and per
//! worker (never on the hot path).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics::{Counter, Gauge};
use workerid_core::observe::{
    SNOWFLAKE_CLOCK_DRIFT, SNOWFLAKE_IDS, SNOWFLAKE_LAYOUT_REMAINING_SECONDS,
    SNOWFLAKE_SEQUENCE_WAITS, WORKER_LEASES_LOST, WORKER_LEASE_REMAINING_SECONDS,
    WORKER_LEASE_TTL_SECONDS, WORKER_RENEWAL_RETRIES,
};
use workerid_core::Namespace;

use crate::Layout;

/// A generator's metrics. IDs are counted when the generator moves to a
/// new time unit (in the slow path), so the fast path does not change.
pub(crate) struct GeneratorMeters {
    ids: Counter,
    drift_waited: Counter,
    drift_try_later: Counter,
    drift_too_large: Counter,
    sequence_waits: Counter,
    /// `(timestamp << sequence bits) | sequence` of the first claim of
    /// the current unit, made by a move to a new unit; 0 before any.
    unit_first: AtomicU64,
}

impl fmt::Debug for GeneratorMeters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GeneratorMeters")
    }
}

impl GeneratorMeters {
    pub(crate) fn new() -> GeneratorMeters {
        let drift =
            |bucket: &'static str| metrics::counter!(SNOWFLAKE_CLOCK_DRIFT, "bucket" => bucket);
        GeneratorMeters {
            ids: metrics::counter!(SNOWFLAKE_IDS),
            drift_waited: drift("waited"),
            drift_try_later: drift("try_later"),
            drift_too_large: drift("too_large"),
            sequence_waits: metrics::counter!(SNOWFLAKE_SEQUENCE_WAITS),
            unit_first: AtomicU64::new(0),
        }
    }

    /// A claim moved `last` from `previous` (its unit now over) to a new
    /// unit starting at `first`: counts the previous unit's IDs if this
    /// generator started it.
    pub(crate) fn new_unit(&self, previous: u64, first: u64, seq_bits: u32) {
        self.count_unit(previous, seq_bits);
        self.unit_first.store(first, Ordering::Relaxed);
    }

    /// Counts the IDs of the unit `last` is in, if a move to a new unit
    /// started it (a unit set from a watermark was never claimed).
    pub(crate) fn count_unit(&self, last: u64, seq_bits: u32) {
        let first = self.unit_first.load(Ordering::Relaxed);
        if first != 0 && first >> seq_bits == last >> seq_bits && last >= first {
            self.ids.increment(last - first + 1);
        }
    }

    pub(crate) fn drift_waited(&self) {
        self.drift_waited.increment(1);
    }

    pub(crate) fn drift_try_later(&self) {
        self.drift_try_later.increment(1);
    }

    pub(crate) fn drift_too_large(&self) {
        self.drift_too_large.increment(1);
    }

    pub(crate) fn sequence_wait(&self) {
        self.sequence_waits.increment(1);
    }
}

/// A worker's metrics, labelled by its namespace.
pub(crate) struct WorkerMeters {
    retries: Counter,
    lost: Counter,
    remaining: Gauge,
    layout_remaining: Gauge,
}

impl fmt::Debug for WorkerMeters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WorkerMeters")
    }
}

impl WorkerMeters {
    /// The meters of a worker of `namespace` whose lease's ttl is `ttl`.
    pub(crate) fn new(namespace: &Namespace, ttl: Duration) -> WorkerMeters {
        let ns = namespace.as_str().to_owned();
        metrics::gauge!(WORKER_LEASE_TTL_SECONDS, "namespace" => ns.clone()).set(ttl.as_secs_f64());
        WorkerMeters {
            retries: metrics::counter!(WORKER_RENEWAL_RETRIES, "namespace" => ns.clone()),
            lost: metrics::counter!(WORKER_LEASES_LOST, "namespace" => ns.clone()),
            remaining: metrics::gauge!(WORKER_LEASE_REMAINING_SECONDS, "namespace" => ns),
            layout_remaining: metrics::gauge!(SNOWFLAKE_LAYOUT_REMAINING_SECONDS),
        }
    }

    pub(crate) fn retried(&self) {
        self.retries.increment(1);
    }

    pub(crate) fn lost(&self) {
        self.lost.increment(1);
        self.remaining.set(0.0);
    }

    /// The lease deadline and the clock, both on the clock's monotonic
    /// time, and the clock's wall time.
    pub(crate) fn renewal(
        &self,
        deadline: Duration,
        mono: Duration,
        wall: Duration,
        layout: &Layout,
    ) {
        self.remaining
            .set(deadline.saturating_sub(mono).as_secs_f64());
        let end = layout.time_of(layout.max_timestamp());
        self.layout_remaining
            .set(end.saturating_sub(wall).as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use metrics::{Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

    use super::*;
    use crate::{Clock, FakeClock, Generator};

    /// A recorder that keeps its counters, by name and labels.
    #[derive(Debug, Default)]
    struct Counters(Mutex<HashMap<String, Arc<AtomicU64>>>);

    impl Counters {
        fn get(&self, name: &str) -> u64 {
            let counters = self.0.lock().unwrap();
            counters.get(name).map_or(0, |c| c.load(Ordering::SeqCst))
        }
    }

    impl Recorder for Counters {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let mut name = key.name().to_string();
            for label in key.labels() {
                name += &format!("{{{}={}}}", label.key(), label.value());
            }
            Counter::from_arc(self.0.lock().unwrap().entry(name).or_default().clone())
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    #[test]
    fn a_generator_counts_each_units_ids_when_it_ends_and_each_wait_once() {
        let counters = Counters::default();
        let t0 = Duration::from_secs(1_800_000_000) + Duration::from_micros(300);
        let clock = Arc::new(FakeClock::at(t0));
        let g = metrics::with_local_recorder(&counters, || {
            Generator::new(Layout::classic(), 5, clock.clone()).unwrap()
        });
        for _ in 0..3 {
            g.next_id().unwrap();
        }
        assert_eq!(counters.get(SNOWFLAKE_IDS), 0, "counted when the unit ends");
        clock.advance(Duration::from_millis(1));
        g.next_id().unwrap();
        assert_eq!(counters.get(SNOWFLAKE_IDS), 3);
        for _ in 0..4095 {
            g.next_id().unwrap();
        }
        assert_eq!(counters.get(SNOWFLAKE_SEQUENCE_WAITS), 0, "4096 in a unit");
        let before = clock.now().mono;
        g.next_id().unwrap();
        assert_eq!(clock.now().mono - before, Duration::from_micros(700));
        assert_eq!(
            counters.get(SNOWFLAKE_SEQUENCE_WAITS),
            1,
            "one wait, to the next unit's start"
        );
        assert_eq!(counters.get(SNOWFLAKE_IDS), 3 + 4096);
        g.seal();
        assert_eq!(
            counters.get(SNOWFLAKE_IDS),
            3 + 4096 + 1,
            "sealing counts the last unit"
        );
    }

    #[test]
    fn a_generator_counts_each_step_back_in_its_bucket() {
        let counters = Counters::default();
        let clock = Arc::new(FakeClock::at(Duration::from_secs(1_800_000_000)));
        let g = metrics::with_local_recorder(&counters, || {
            Generator::new(Layout::classic(), 5, clock.clone()).unwrap()
        });
        g.next_id().unwrap();
        let bucket =
            |name: &str| counters.get(&format!("{SNOWFLAKE_CLOCK_DRIFT}{{bucket={name}}}"));
        clock.step_wall(-500);
        g.next_id().unwrap();
        clock.step_wall(-3_000);
        assert!(g.next_id().is_err());
        clock.step_wall(-30_000);
        assert!(g.next_id().is_err());
        assert_eq!(
            (bucket("waited"), bucket("try_later"), bucket("too_large")),
            (1, 1, 1)
        );
    }
}
