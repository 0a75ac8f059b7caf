//! `GET /metrics`: the Prometheus exporter, fed by the libraries'
//! metrics (recorded through the `metrics` facade), the server's own
//! counters and a latency histogram per endpoint.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use workerid::segment::{Error, Range, Result, SegmentStore, Tag, TagInfo};

use crate::supervisor::Snowflake;

/// Buckets of every `_seconds` histogram: 0.5 ms to 10 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Requests answered, by `endpoint` (the route) and `status`.
pub const HTTP_REQUESTS: &str = "workerid_http_requests_total";
/// Time to answer a request, by `endpoint`.
pub const HTTP_REQUEST_SECONDS: &str = "workerid_http_request_duration_seconds";
/// Requests answered with an error, by its `code`.
const REQUEST_ERRORS: &str = "workerid_request_errors_total";
/// The error codes that are the server's failures rather than a client's
/// mistakes (an unknown tag, a bad count): the ones to alert on, shown
/// with 0 from the start so that a dashboard has their series.
pub const SERVER_FAILURE_CODES: [&str; 6] = [
    "store_unavailable",
    "not_ready",
    "clock_drift",
    "tag_exhausted",
    "shutting_down",
    "internal",
];

/// The server's metrics: the exporter's handle and the counters the
/// request paths add to (plain atomics, published at each scrape).
#[derive(Debug)]
pub struct Metrics {
    handle: PrometheusHandle,
    pub segment_ids: AtomicU64,
    pub snowflake_ids: AtomicU64,
    pub store_errors: AtomicU64,
    pub tag_lists: AtomicU64,
    pub fast_path_requests: AtomicU64,
    /// `/alloc` answered 200, the fast path's common case: handles taken
    /// once, so that a request costs no lookup of its labels.
    alloc_ok: (metrics::Counter, metrics::Histogram),
    /// The `workerid_lease_info` labels last shown with 1.
    lease_info: Mutex<Option<[String; 3]>>,
}

/// Values read at render time.
#[derive(Debug, Default)]
pub struct Gauges {
    pub tags_known: usize,
    pub tags_missing: usize,
    pub tags_in_memory: usize,
}

impl Metrics {
    /// Installs the Prometheus recorder for the process, before anything
    /// takes metric handles.
    ///
    /// # Errors
    /// When a recorder is installed already or the buckets are refused.
    pub fn install() -> std::result::Result<Metrics, String> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .and_then(|b| b.install_recorder())
            .map_err(|e| format!("metrics: {e}"))?;
        workerid::observe::describe();
        describe_server_metrics();
        Ok(Metrics {
            handle,
            segment_ids: AtomicU64::new(0),
            snowflake_ids: AtomicU64::new(0),
            store_errors: AtomicU64::new(0),
            tag_lists: AtomicU64::new(0),
            fast_path_requests: AtomicU64::new(0),
            alloc_ok: (
                metrics::counter!(HTTP_REQUESTS, "endpoint" => "/alloc", "status" => "200"),
                metrics::histogram!(HTTP_REQUEST_SECONDS, "endpoint" => "/alloc"),
            ),
            lease_info: Mutex::new(None),
        })
    }

    /// Counts a request answered with the error `code` (the answer's
    /// stable code: `unknown_tag`, `store_unavailable`, ...).
    pub fn request_error(&self, code: &'static str) {
        metrics::counter!(REQUEST_ERRORS, "code" => code).increment(1);
    }

    /// Records one `/alloc` request of the fast path (its hot path): always
    /// counted; its latency recorded when it was timed (`started`).
    pub fn record_alloc(&self, status: u16, started: Option<Instant>) {
        match started {
            Some(started) if status == 200 => {
                self.alloc_ok.1.record(started.elapsed().as_secs_f64());
                self.alloc_ok.0.increment(1);
            }
            Some(started) => {
                record_request(metrics::SharedString::const_str("/alloc"), status, started)
            }
            None if status == 200 => self.alloc_ok.0.increment(1),
            None => metrics::counter!(
                HTTP_REQUESTS,
                "endpoint" => "/alloc",
                "status" => status_label(status)
            )
            .increment(1),
        }
    }

    /// Keeps the exporter's memory bounded between scrapes.
    pub fn spawn_upkeep(self: &Arc<Self>) {
        let metrics = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                match metrics.upgrade() {
                    Some(metrics) => metrics.handle.run_upkeep(),
                    None => return,
                }
            }
        });
    }

    /// The Prometheus text.
    pub fn render(&self, snowflake: Option<&Snowflake>, gauges: &Gauges) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        metrics::counter!("workerid_ids_served_total", "kind" => "segment")
            .absolute(get(&self.segment_ids));
        metrics::counter!("workerid_ids_served_total", "kind" => "snowflake")
            .absolute(get(&self.snowflake_ids));
        metrics::counter!("workerid_store_errors_total").absolute(get(&self.store_errors));
        metrics::counter!("workerid_tag_lists_total").absolute(get(&self.tag_lists));
        metrics::counter!("workerid_fast_path_requests_total")
            .absolute(get(&self.fast_path_requests));
        metrics::gauge!("workerid_tags_known").set(gauges.tags_known as f64);
        metrics::gauge!("workerid_tags_found_missing").set(gauges.tags_missing as f64);
        metrics::gauge!("workerid_tags_in_memory").set(gauges.tags_in_memory as f64);
        if let Some(snowflake) = snowflake {
            self.lease_metrics(snowflake);
        }
        self.handle.render()
    }

    /// The snowflake worker's metrics: only when snowflake IDs are served,
    /// so that an alert on `workerid_lease_ready == 0` never fires for a
    /// server that has no lease to hold. `workerid_lease_info` is 1 for the
    /// worker ID held now, 0 for one held before.
    fn lease_metrics(&self, s: &Snowflake) {
        let id = s.worker_id();
        let counts = s.counts();
        metrics::gauge!("workerid_lease_ready").set(if id.is_some() { 1.0 } else { 0.0 });
        metrics::counter!("workerid_lease_joins_total").absolute(counts.joins);
        metrics::counter!("workerid_lease_losses_total").absolute(counts.losses);
        metrics::counter!("workerid_lease_join_failures_total").absolute(counts.join_failures);
        let now = id.map(|id| {
            [
                s.namespace().to_string(),
                s.holder().to_string(),
                id.to_string(),
            ]
        });
        let mut shown = self
            .lease_info
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *shown != now {
            if let Some([namespace, holder, worker_id]) = shown.take() {
                metrics::gauge!("workerid_lease_info", "namespace" => namespace,
                    "holder" => holder, "worker_id" => worker_id)
                .set(0.0);
            }
            if let Some([namespace, holder, worker_id]) = now.clone() {
                metrics::gauge!("workerid_lease_info", "namespace" => namespace,
                    "holder" => holder, "worker_id" => worker_id)
                .set(1.0);
            }
            *shown = now;
        }
    }
}

/// How often the namespace is listed for `workerid_pool_usage_ratio`.
const POOL_WATCH_EVERY: Duration = Duration::from_secs(15);

/// Lists the snowflake namespace every [`POOL_WATCH_EVERY`] (when the store
/// can list), which sets `workerid_pool_usage_ratio`, until `stopped`.
pub fn spawn_pool_watch(
    allocator: workerid::Allocator,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    if !allocator.store().capabilities().list {
        return;
    }
    tokio::spawn(async move {
        loop {
            if let Err(e) = allocator.list().await {
                tracing::debug!("listing the namespace for its pool usage: {e}");
            }
            tokio::select! {
                _ = tokio::time::sleep(POOL_WATCH_EVERY) => {}
                _ = stopped.wait_for(|&s| s) => return,
            }
        }
    });
}

/// The span of one request to `endpoint` (the metrics' label: a route
/// template or a gRPC method), at DEBUG under the target
/// `workerid::request`, so that it is off, at the cost of one cached
/// check, unless the filter names it (`RUST_LOG=info,workerid::request=debug`).
/// The store spans the request causes are its children; its status is
/// recorded by [`end_request_span`].
pub fn request_span(endpoint: &str) -> tracing::Span {
    tracing::debug_span!(
        target: "workerid::request",
        "workerid.request",
        "otel.name" = endpoint,
        "otel.kind" = "server",
        "workerid.endpoint" = endpoint,
        "http.response.status_code" = tracing::field::Empty,
    )
}

/// Records the status (the HTTP one, or the one a gRPC status stands for)
/// on a span of [`request_span`].
pub fn end_request_span(span: &tracing::Span, status: u16) {
    span.record("http.response.status_code", status);
}

/// Records one answered request.
pub fn record_request(endpoint: metrics::SharedString, status: u16, started: Instant) {
    metrics::histogram!(HTTP_REQUEST_SECONDS, "endpoint" => endpoint.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "endpoint" => endpoint, "status" => status_label(status))
        .increment(1);
}

/// A status code as a label, without an allocation for the ones the
/// server answers.
fn status_label(status: u16) -> metrics::SharedString {
    let known = match status {
        200 => "200",
        400 => "400",
        401 => "401",
        404 => "404",
        500 => "500",
        503 => "503",
        other => return other.to_string().into(),
    };
    metrics::SharedString::const_str(known)
}

fn describe_server_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("workerid_ids_served_total", "IDs served, by kind.");
    for code in SERVER_FAILURE_CODES {
        metrics::counter!(REQUEST_ERRORS, "code" => code).absolute(0);
    }
    describe_counter!(
        REQUEST_ERRORS,
        "Requests answered with an error, by its code."
    );
    describe_counter!(
        "workerid_store_errors_total",
        "Segment store calls that failed to answer (not unknown tags), timeouts included."
    );
    describe_counter!(
        "workerid_tag_lists_total",
        "Reads of the whole tag list from the store."
    );
    describe_counter!(
        "workerid_fast_path_requests_total",
        "Requests answered on the /alloc fast path."
    );
    describe_gauge!(
        "workerid_tags_known",
        "Tags in the server's view of the store."
    );
    describe_gauge!(
        "workerid_tags_found_missing",
        "Tags of the view the store no longer knows."
    );
    describe_gauge!(
        "workerid_tags_in_memory",
        "Tags with allocator state in memory."
    );
    describe_gauge!(
        "workerid_lease_ready",
        "Whether the snowflake worker holds a live lease."
    );
    describe_gauge!(
        "workerid_lease_info",
        "The worker ID held (1), or held before (0), with its namespace and holder label."
    );
    describe_counter!(
        "workerid_lease_joins_total",
        "Snowflake workers that joined (a first start and every rejoin)."
    );
    describe_counter!(
        "workerid_lease_losses_total",
        "Snowflake workers that lost their lease."
    );
    describe_counter!(
        "workerid_lease_join_failures_total",
        "Snowflake join attempts that failed."
    );
    describe_counter!(HTTP_REQUESTS, "Requests answered, by endpoint and status.");
    describe_histogram!(
        HTTP_REQUEST_SECONDS,
        Unit::Seconds,
        "Time to answer a request, by endpoint."
    );
}

/// A segment store that counts tag listings and failures to answer; the
/// server's store inside it is [`TimeLimited`](workerid::segment::TimeLimited),
/// so that a call that timed out is counted too.
#[derive(Debug)]
pub struct Counted<S> {
    pub inner: S,
    pub metrics: Arc<Metrics>,
}

impl<S: SegmentStore> Counted<S> {
    async fn call<T>(&self, request: impl Future<Output = Result<T>>) -> Result<T> {
        let result = request.await;
        // An unknown tag or an exhausted one is the caller's mistake, not
        // the store's: only failures to answer count.
        if matches!(result, Err(Error::Unavailable { .. })) {
            self.metrics.store_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

#[async_trait::async_trait]
impl<S: SegmentStore> SegmentStore for Counted<S> {
    fn segment_capabilities(&self) -> workerid::segment::SegmentCapabilities {
        self.inner.segment_capabilities()
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        self.call(self.inner.create_tag(tag, first_id, step)).await
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        self.call(self.inner.reserve(tag, step)).await
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        self.call(self.inner.give_back(tag, reserved, new_max))
            .await
    }
    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        self.metrics.tag_lists.fetch_add(1, Ordering::Relaxed);
        self.call(self.inner.list_tags()).await
    }
}
