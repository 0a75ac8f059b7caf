//! The one list of metric names the libraries record, with their labels.

/// What kind of metric a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only ever goes up.
    Counter,
    /// Set to a value.
    Gauge,
    /// A distribution of durations in seconds.
    Histogram,
}

/// One metric: its name, kind, unit, labels and meaning.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The name, as Prometheus shows it.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Seconds for durations; `None` for counts and ratios.
    pub unit: Option<metrics::Unit>,
    /// The labels every sample carries.
    pub labels: &'static [&'static str],
    /// What it measures.
    pub help: &'static str,
}

macro_rules! metric_names {
    ($($(#[$doc:meta])* $constant:ident = $name:literal, $kind:ident, $unit:expr, [$($label:literal),*], $help:literal;)+) => {
        $(
            $(#[$doc])*
            #[doc = concat!("\n\n`", $name, "`: ", $help)]
            pub const $constant: &str = $name;
        )+
        /// Every metric the libraries record.
        pub const ALL_METRICS: &[Metric] = &[$(Metric {
            name: $name,
            kind: MetricKind::$kind,
            unit: $unit,
            labels: &[$($label),*],
            help: $help,
        }),+];
    };
}

metric_names! {
    /// Counter, by `namespace`.
    LEASE_GRANTS = "workerid_lease_grants_total", Counter, None, ["namespace"],
        "Worker IDs granted to this process.";
    /// Counter, by `namespace` and `outcome` (`ok`, `error`).
    LEASE_RENEWALS = "workerid_lease_renewals_total", Counter, None, ["namespace", "outcome"],
        "Lease renewals, by outcome.";
    /// Histogram, by `namespace`: the whole renewal as the allocator saw it.
    LEASE_RENEWAL_SECONDS = "workerid_lease_renewal_seconds", Histogram,
        Some(metrics::Unit::Seconds), ["namespace"],
        "Time a lease renewal took, failed ones included.";
    /// Counter, by `namespace`.
    LEASE_RELEASES = "workerid_lease_releases_total", Counter, None, ["namespace"],
        "Leases released by this process.";
    /// Gauge, by `namespace`: set by every listing, and to 1 when an
    /// acquire finds every ID held. Alert above 0.8.
    POOL_USAGE = "workerid_pool_usage_ratio", Gauge, None, ["namespace"],
        "Live leases over the pool size of the namespace, at the last listing.";
    /// Histogram, by `store` (its kind) and `operation`.
    STORE_OPERATION_SECONDS = "workerid_store_operation_seconds", Histogram,
        Some(metrics::Unit::Seconds), ["store", "operation"],
        "Time a call into the store took.";
    /// Counter, by `store`, `operation` and `error_type` (the error's
    /// [`ErrorType`](super::ErrorType), or `cancelled` for a call dropped
    /// before it answered).
    STORE_ERRORS = "workerid_store_operation_errors_total", Counter, None,
        ["store", "operation", "error_type"],
        "Calls into the store that returned an error.";
    /// Counter, by `namespace`.
    WORKER_RENEWAL_RETRIES = "workerid_worker_renewal_retries_total", Counter, None,
        ["namespace"],
        "Renewals a snowflake worker retried after the store did not answer.";
    /// Counter, by `namespace`.
    WORKER_LEASES_LOST = "workerid_worker_leases_lost_total", Counter, None, ["namespace"],
        "Leases a snowflake worker lost (it stopped issuing IDs).";
    /// Gauge, by `namespace`: set at every renewal attempt, retries
    /// during an outage included.
    WORKER_LEASE_REMAINING_SECONDS = "workerid_worker_lease_remaining_seconds", Gauge,
        Some(metrics::Unit::Seconds), ["namespace"],
        "Time left before the worker's lease deadline, at its last renewal attempt.";
    /// Gauge, by `namespace`: the ttl of the worker's lease, set when it
    /// joins; what the lease's time left and its renewals' latency are
    /// compared with.
    WORKER_LEASE_TTL_SECONDS = "workerid_worker_lease_ttl_seconds", Gauge,
        Some(metrics::Unit::Seconds), ["namespace"],
        "The ttl of the snowflake worker's lease.";
    /// Counter: sequence numbers claimed, counted when the generator moves
    /// to a new time unit (numbers given up by racing threads included).
    SNOWFLAKE_IDS = "workerid_snowflake_ids_total", Counter, None, [],
        "Snowflake IDs issued, counted per time unit.";
    /// Counter, by `bucket` (`waited`, `try_later`, `too_large`), the
    /// buckets of the drift policy.
    SNOWFLAKE_CLOCK_DRIFT = "workerid_snowflake_clock_drift_total", Counter, None, ["bucket"],
        "Times the clock was found behind the last ID's timestamp.";
    /// Counter.
    SNOWFLAKE_SEQUENCE_WAITS = "workerid_snowflake_sequence_waits_total", Counter, None, [],
        "Waits for the next time unit after a unit's sequence ran out.";
    /// Gauge: set when a worker joins and at every renewal. Alert below a year.
    SNOWFLAKE_LAYOUT_REMAINING_SECONDS = "workerid_snowflake_layout_remaining_seconds", Gauge,
        Some(metrics::Unit::Seconds), [],
        "Time left before the layout's timestamp bits run out.";
    /// Counter, by `tag`.
    SEGMENT_LOADS = "workerid_segment_loads_total", Counter, None, ["tag"],
        "Segments reserved from the store.";
    /// Counter, by `tag`.
    SEGMENT_STALLS = "workerid_segment_stalls_total", Counter, None, ["tag"],
        "Calls that found both segment buffers empty and waited for the store.";
    /// Counter, by `tag`: counted when a segment is used up.
    SEGMENT_IDS = "workerid_segment_ids_total", Counter, None, ["tag"],
        "Segment IDs handed out, counted per used-up segment.";
    /// Gauge, by `tag`: set at every load and switch. Alert at 0 while IDs
    /// are asked for.
    SEGMENT_BUFFER_IDS = "workerid_segment_buffer_ids", Gauge, None, ["tag"],
        "IDs left in memory (current and prefetched segment) at the last load or switch.";
}
