//! What the libraries tell about themselves: the names of their metrics
//! (recorded through the [`metrics`] facade), the fields of their spans
//! (through [`tracing`]), and [`Instrumented`], a store wrapper that
//! records both for every call into any store.
//!
//! Nothing is recorded unless the application installs a recorder (for
//! example `metrics-exporter-prometheus`) and a subscriber: without them a
//! metric costs an atomic load and a span a check of a level. Install the
//! recorder before building allocators, workers and segment allocators:
//! they take their metric handles when they are built.
//!
//! No token and no password is ever a field or a label: a lease is named by
//! its namespace and worker ID, a store by its kind and address.

use std::future::Future;
use std::time::Instant;

use tracing::Instrument;

mod names;
mod store;

pub use names::*;
pub use store::{Instrumented, StoreLabels};

/// A stable name for each error, for the `error.type` span field and the
/// `error_type` label of [`STORE_ERRORS`].
pub trait ErrorType {
    /// The error's kind in `snake_case` (`"unavailable"`, `"token_mismatch"`, ...).
    fn error_type(&self) -> &'static str;
}

impl ErrorType for crate::Error {
    fn error_type(&self) -> &'static str {
        use crate::Error::*;
        match self {
            NoAvailableId { .. } => "no_available_id",
            InvalidWorkerId { .. } => "invalid_worker_id",
            TokenMismatch { .. } => "token_mismatch",
            TokenExpired { .. } => "token_expired",
            NotAssigned { .. } => "not_assigned",
            InvalidToken { .. } => "invalid_token",
            InvalidConfig { .. } => "invalid_config",
            ConfigMismatch { .. } => "config_mismatch",
            NamespaceInUse { .. } => "namespace_in_use",
            Unsupported { .. } => "unsupported",
            Unavailable { .. } => "unavailable",
        }
    }
}

/// Registers the description and unit of every metric of [`ALL_METRICS`]
/// with the installed recorder, so that an exporter prints them (Prometheus'
/// `# HELP`). Call it once, after installing the recorder.
///
/// ```
/// workerid_core::observe::describe();
/// ```
pub fn describe() {
    for metric in ALL_METRICS {
        let unit = metric.unit;
        match metric.kind {
            MetricKind::Counter => metrics::describe_counter!(metric.name, metric.help),
            MetricKind::Gauge if unit == Some(metrics::Unit::Seconds) => {
                metrics::describe_gauge!(metric.name, metrics::Unit::Seconds, metric.help)
            }
            MetricKind::Gauge => metrics::describe_gauge!(metric.name, metric.help),
            MetricKind::Histogram => {
                metrics::describe_histogram!(metric.name, metrics::Unit::Seconds, metric.help)
            }
        }
    }
}

/// Runs one call into a store under a span named `workerid.store` and
/// records its duration ([`STORE_OPERATION_SECONDS`]) and, when it fails,
/// its error ([`STORE_ERRORS`]); a call whose future is dropped before it
/// answers (a caller's timeout) is recorded with the error type
/// `cancelled`. `target` is the namespace or the tag the
/// call is about; `worker_id` the worker ID, when the call names one.
///
/// For wrappers of other store traits; [`Instrumented`] uses it for
/// [`LeaseStore`](crate::LeaseStore).
///
/// # Errors
/// Whatever the call returns, unchanged.
pub async fn observe_store_call<T, E, F>(
    labels: &StoreLabels,
    operation: &'static str,
    target: &str,
    worker_id: Option<u32>,
    call: F,
) -> Result<T, E>
where
    E: ErrorType,
    F: Future<Output = Result<T, E>>,
{
    let span = tracing::info_span!(
        "workerid.store",
        "db.system.name" = labels.system,
        "db.operation.name" = operation,
        "server.address" = labels.address.as_deref(),
        "workerid.target" = target,
        "workerid.worker_id" = worker_id,
        "error.type" = tracing::field::Empty,
    );
    let mut pending = Pending {
        store: labels.system,
        operation,
        started: Instant::now(),
        span: span.clone(),
        done: false,
    };
    let answer = call.instrument(span).await;
    pending.done(answer.as_ref().err().map(ErrorType::error_type));
    answer
}

/// One store call being observed: recorded when it answers, or as
/// `cancelled` when its future is dropped first (a caller's timeout), so
/// that a store that hangs shows in the latency and the errors.
struct Pending {
    store: &'static str,
    operation: &'static str,
    started: Instant,
    span: tracing::Span,
    done: bool,
}

impl Pending {
    fn done(&mut self, error_type: Option<&'static str>) {
        self.done = true;
        let (store, operation) = (self.store, self.operation);
        metrics::histogram!(STORE_OPERATION_SECONDS, "store" => store, "operation" => operation)
            .record(self.started.elapsed().as_secs_f64());
        if let Some(error_type) = error_type {
            self.span.record("error.type", error_type);
            metrics::counter!(STORE_ERRORS, "store" => store, "operation" => operation,
                "error_type" => error_type)
            .increment(1);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            self.done(Some("cancelled"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_documented_and_named_once() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/observability.md");
        let page = std::fs::read_to_string(path).expect("docs/observability.md");
        let mut seen = std::collections::HashSet::new();
        for metric in ALL_METRICS {
            assert!(seen.insert(metric.name), "{} twice", metric.name);
            assert!(
                page.contains(&format!("`{}`", metric.name)),
                "docs/observability.md does not list {}",
                metric.name
            );
            assert!(metric.name.starts_with("workerid_"));
            assert_eq!(
                metric.kind == MetricKind::Counter,
                metric.name.ends_with("_total"),
                "{}: counters and only counters end in _total",
                metric.name
            );
        }
    }

    #[test]
    fn error_types_are_snake_case() {
        let e = crate::Error::unavailable("redis", "refused");
        assert_eq!(e.error_type(), "unavailable");
        let e = crate::Error::NoAvailableId { max_worker_id: 3 };
        assert_eq!(e.error_type(), "no_available_id");
    }
}
