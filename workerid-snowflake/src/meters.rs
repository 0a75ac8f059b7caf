//! The snowflake crate's metric handles, taken once per generator and per
//! worker (never on the hot path).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics::{Counter, Gauge};
use workerid_core::observe::{
    SNOWFLAKE_CLOCK_DRIFT, SNOWFLAKE_IDS, SNOWFLAKE_LAYOUT_REMAINING_SECONDS,
    SNOWFLAKE_SEQUENCE_WAITS, WORKER_LEASES_LOST, WORKER_LEASE_REMAINING_SECONDS,
    WORKER_RENEWAL_RETRIES,
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
    pub(crate) fn new(namespace: &Namespace) -> WorkerMeters {
        let ns = namespace.as_str().to_owned();
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
