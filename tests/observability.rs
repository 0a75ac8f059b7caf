//! What the libraries record, seen by a test recorder and a test
//! subscriber: a renewal, a segment refill, a lost lease and clock drift
//! each move their metrics and leave their spans, and no token or
//! password appears in any span field, log field, metric or label.

#[cfg(not(feature = "all"))]
compile_error!(
    "the facade's tests open every store: run them with `--features all` \
     (bash scripts/test.sh and cargo test --workspace turn it on)"
);

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_util::registry::{AtomicStorage, Registry};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use workerid::observe;
use workerid::segment::{SegmentAllocator, SegmentOptions};
use workerid::snowflake::{
    Clock, FakeClock, Generator, Layout, Worker, WorkerOptions, WorkerState,
};
use workerid::{Allocator, LeaseOptions};

/// A span or an event as the test subscriber saw it: its name and every
/// field, recorded at creation or later.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    fields: Vec<(String, String)>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Visit for Seen {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields.push((
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        ));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .push((field.name().to_owned(), value.to_owned()));
    }
}

#[derive(Default)]
struct Captured {
    spans: Vec<Seen>,
    events: Vec<Seen>,
}

struct Capture(Arc<Mutex<Captured>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut seen = Seen {
            name: attrs.metadata().name().to_owned(),
            ..Seen::default()
        };
        attrs.record(&mut seen);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(seen);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(seen) = span.extensions_mut().get_mut::<Seen>() {
                values.record(seen);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut seen = Seen {
            name: event.metadata().target().to_owned(),
            ..Seen::default()
        };
        event.record(&mut seen);
        self.0.lock().unwrap().events.push(seen);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(seen) = span.extensions_mut().remove::<Seen>() {
                self.0.lock().unwrap().spans.push(seen);
            }
        }
    }
}

/// A recorder that keeps every value for reading (and never resets one).
#[derive(Clone)]
struct TestRecorder(Arc<Registry<Key, AtomicStorage>>);

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.0
            .get_or_create_counter(key, |c| Counter::from_arc(c.clone()))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.0
            .get_or_create_gauge(key, |g| Gauge::from_arc(g.clone()))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.0
            .get_or_create_histogram(key, |h| Histogram::from_arc(h.clone()))
    }
}

/// A sample's value.
#[derive(Debug)]
enum Value {
    Counter(u64),
    Gauge(f64),
    Histogram(Vec<f64>),
}

struct Observed {
    recorder: TestRecorder,
    captured: Arc<Mutex<Captured>>,
}

/// The test recorder and subscriber, installed once for the process (each
/// test uses namespaces and tags of its own).
fn observed() -> &'static Observed {
    static OBSERVED: OnceLock<Observed> = OnceLock::new();
    OBSERVED.get_or_init(|| {
        let recorder = TestRecorder(Arc::new(Registry::atomic()));
        metrics::set_global_recorder(recorder.clone()).expect("the only recorder");
        observe::describe();
        let captured = Arc::new(Mutex::new(Captured::default()));
        let subscriber = tracing_subscriber::registry().with(Capture(captured.clone()));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        Observed { recorder, captured }
    })
}

/// A sample: name, labels, value.
type Sample = (String, Vec<(String, String)>, Value);

/// Every sample.
fn samples() -> Vec<Sample> {
    use std::sync::atomic::Ordering::Relaxed;
    let registry = &observed().recorder.0;
    let counters = registry
        .get_counter_handles()
        .into_iter()
        .map(|(k, c)| (k, Value::Counter(c.load(Relaxed))));
    let gauges = registry
        .get_gauge_handles()
        .into_iter()
        .map(|(k, g)| (k, Value::Gauge(f64::from_bits(g.load(Relaxed)))));
    let histograms = registry
        .get_histogram_handles()
        .into_iter()
        .map(|(k, h)| (k, Value::Histogram(h.data())));
    counters
        .chain(gauges)
        .chain(histograms)
        .map(|(key, value)| {
            let labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            (key.name().to_owned(), labels, value)
        })
        .collect()
}

/// The value of `name` whose labels include `labels`.
fn value(name: &str, labels: &[(&str, &str)]) -> Option<Value> {
    samples().into_iter().find_map(|(n, l, v)| {
        (n == name
            && labels
                .iter()
                .all(|(k, want)| l.iter().any(|(lk, lv)| lk == k && lv == want)))
        .then_some(v)
    })
}

fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    match value(name, labels) {
        Some(Value::Counter(n)) => n,
        None => 0,
        other => panic!("{name} is not a counter: {other:?}"),
    }
}

fn gauge(name: &str, labels: &[(&str, &str)]) -> f64 {
    match value(name, labels) {
        Some(Value::Gauge(g)) => g,
        other => panic!("{name}{labels:?} is not a gauge that was set: {other:?}"),
    }
}

fn histogram_len(name: &str, labels: &[(&str, &str)]) -> usize {
    match value(name, labels) {
        Some(Value::Histogram(h)) => h.len(),
        None => 0,
        other => panic!("{name} is not a histogram: {other:?}"),
    }
}

/// The closed spans named `name` with `field` = `value`.
fn spans(name: &str, field: &str, value: &str) -> Vec<Seen> {
    observed()
        .captured
        .lock()
        .unwrap()
        .spans
        .iter()
        .filter(|s| s.name == name && s.field(field) == Some(value))
        .cloned()
        .collect()
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("not within 5 s: {what}");
}

fn lease_options(ttl: Duration) -> LeaseOptions {
    LeaseOptions::new()
        .worker_bits(2)
        .max_lease_time(ttl)
        .ttl(ttl)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_is_counted_timed_and_traced() {
    observed();
    let ns = "observe-renewal";
    let store = workerid::open("memory://").await.unwrap();
    let allocator = Allocator::new(store, ns, lease_options(Duration::from_millis(600))).unwrap();
    let worker = Worker::join(allocator, WorkerOptions::new()).await.unwrap();
    let labels = [("namespace", ns), ("outcome", "ok")];
    // The join reserves a first window (one renewal); wait for the keeper's.
    eventually("two renewals", || {
        counter(observe::LEASE_RENEWALS, &labels) >= 2
    })
    .await;
    assert_eq!(counter(observe::LEASE_GRANTS, &[("namespace", ns)]), 1);
    assert!(histogram_len(observe::LEASE_RENEWAL_SECONDS, &[("namespace", ns)]) >= 2);
    let left = gauge(
        observe::WORKER_LEASE_REMAINING_SECONDS,
        &[("namespace", ns)],
    );
    assert!(left > 0.0 && left <= 0.6, "time left {left}");
    let horizon = gauge(observe::SNOWFLAKE_LAYOUT_REMAINING_SECONDS, &[]);
    assert!(
        horizon > 365.0 * 86_400.0,
        "the classic layout lasts decades: {horizon}"
    );
    let store_renewals = [("store", "memory"), ("operation", "renew")];
    assert!(histogram_len(observe::STORE_OPERATION_SECONDS, &store_renewals) >= 2);

    let renewals = spans("workerid.worker.renew", "workerid.namespace", ns);
    assert!(!renewals.is_empty(), "a renewal span");
    assert_eq!(
        renewals[0].field("workerid.worker_id"),
        Some(&*worker.worker_id().to_string())
    );
    let store_spans = spans("workerid.store", "workerid.target", ns);
    assert!(store_spans
        .iter()
        .any(|s| s.field("db.operation.name") == Some("renew")
            && s.field("db.system.name") == Some("memory")));
    assert!(store_spans
        .iter()
        .any(|s| s.field("db.operation.name") == Some("acquire")));

    worker.next_id().unwrap();
    assert_eq!(worker.stop().await, WorkerState::Stopped);
    assert_eq!(counter(observe::LEASE_RELEASES, &[("namespace", ns)]), 1);
    assert!(
        counter(observe::SNOWFLAKE_IDS, &[]) >= 1,
        "the sealed unit's IDs are counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_is_counted_with_its_error_type() {
    observed();
    let ns = "observe-lost";
    let store = workerid::open("memory://").await.unwrap();
    let options = lease_options(Duration::from_millis(600));
    let allocator = Allocator::new(store.clone(), ns, options.clone()).unwrap();
    let worker = Worker::join(allocator, WorkerOptions::new()).await.unwrap();
    let operator = Allocator::new(store, ns, options).unwrap();
    assert!(operator
        .force_release(u64::from(worker.worker_id()))
        .await
        .unwrap());
    assert!(matches!(worker.stopped().await, WorkerState::Lost { .. }));

    assert_eq!(
        counter(observe::WORKER_LEASES_LOST, &[("namespace", ns)]),
        1
    );
    assert_eq!(
        gauge(
            observe::WORKER_LEASE_REMAINING_SECONDS,
            &[("namespace", ns)]
        ),
        0.0
    );
    let failed = [("namespace", ns), ("outcome", "error")];
    assert_eq!(counter(observe::LEASE_RENEWALS, &failed), 1);
    let errors = [
        ("store", "memory"),
        ("operation", "renew"),
        ("error_type", "not_assigned"),
    ];
    assert!(counter(observe::STORE_ERRORS, &errors) >= 1);
    let renewals = spans("workerid.worker.renew", "workerid.namespace", ns);
    assert!(renewals
        .iter()
        .any(|s| s.field("error.type") == Some("not_assigned")));
    // The operator's listing (inside force_release's checks) is not needed for
    // the pool gauge; a listing sets it.
    operator.list().await.unwrap();
    assert_eq!(gauge(observe::POOL_USAGE, &[("namespace", ns)]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refill_is_counted_and_traced() {
    observed();
    let tag = "observe-refill";
    let store = workerid::open("memory://").await.unwrap();
    let segments = SegmentAllocator::new(store, SegmentOptions::default());
    segments.create_tag(tag, 1, 10).await.unwrap();
    for _ in 0..25 {
        segments.next_id(tag).await.unwrap();
    }
    let t = [("tag", tag)];
    // A first segment of 10, then the dynamic step doubles.
    assert!(
        counter(observe::SEGMENT_LOADS, &t) >= 2,
        "25 IDs from a first segment of 10"
    );
    assert!(
        counter(observe::SEGMENT_STALLS, &t) >= 1,
        "the first call waits"
    );
    assert!(counter(observe::SEGMENT_IDS, &t) >= 10, "a used-up segment");
    let left = gauge(observe::SEGMENT_BUFFER_IDS, &t);
    assert!(left > 0.0, "the prefetched segment is in memory: {left}");
    let refills = spans("workerid.segment.refill", "workerid.tag", tag);
    assert!(refills.len() >= 2);
    let reserves = spans("workerid.store", "workerid.target", tag);
    assert!(reserves
        .iter()
        .any(|s| s.field("db.operation.name") == Some("reserve")));
}

#[test]
fn clock_drift_is_counted_by_bucket() {
    observed();
    let clock = Arc::new(FakeClock::at(Duration::from_secs(1_800_000_000)));
    let generator = Generator::new(Layout::classic(), 1, clock.clone()).unwrap();
    let drift = |bucket| counter(observe::SNOWFLAKE_CLOCK_DRIFT, &[("bucket", bucket)]);
    let before = (drift("waited"), drift("try_later"), drift("too_large"));
    generator.next_id().unwrap();
    clock.step_wall(-5);
    generator.next_id().expect("5 ms back is waited out");
    clock.step_wall(-3_000);
    assert!(generator.next_id().is_err(), "3 s back: try later");
    clock.step_wall(-60_000);
    assert!(generator.next_id().is_err(), "a minute back: too large");
    assert_eq!(drift("waited"), before.0 + 1);
    assert_eq!(drift("try_later"), before.1 + 1);
    assert_eq!(drift("too_large"), before.2 + 1);
    assert!(clock.now().wall > Duration::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_password_is_a_field_or_a_label() {
    observed();
    let ns = "observe-secrets";
    let redis = tokio::task::spawn_blocking(|| {
        workerid_testkit::redis::RedisServer::start_with_password(Default::default())
    })
    .await
    .unwrap();
    let url = redis.url_with_password(workerid_testkit::PASSWORD);
    let store = workerid::open(&url).await.unwrap();
    let allocator = Allocator::new(store, ns, lease_options(Duration::from_secs(5))).unwrap();
    let mut lease = allocator.acquire().await.unwrap();
    allocator.renew(&mut lease).await.unwrap();
    allocator.release(&lease).await.unwrap();
    // A refused call too: its error travels through the span.
    assert!(allocator.renew(&mut lease).await.is_err());
    let token = lease.token().to_string();
    let secrets = [
        token.as_str(),
        workerid_testkit::PASSWORD,
        workerid_testkit::PASSWORD_IN_URL,
    ];
    let captured = observed().captured.lock().unwrap();
    let redis_spans = captured
        .spans
        .iter()
        .filter(|s| s.field("db.system.name") == Some("redis"))
        .count();
    assert!(redis_spans >= 4, "{redis_spans} store spans of Redis");
    for seen in captured.spans.iter().chain(&captured.events) {
        for (field, value) in &seen.fields {
            for secret in secrets {
                assert!(
                    !value.contains(secret),
                    "{} field {field} shows {secret}",
                    seen.name
                );
            }
        }
    }
    drop(captured);
    for (name, labels, _) in samples() {
        for (key, value) in labels {
            for secret in secrets {
                assert!(!value.contains(secret), "{name} label {key} shows {secret}");
            }
        }
    }
}

/// A store that never answers.
#[derive(Debug)]
struct Hanging;

#[async_trait::async_trait]
impl workerid::LeaseStore for Hanging {
    fn capabilities(&self) -> workerid::Capabilities {
        workerid::Capabilities::default()
    }
    async fn acquire(
        &self,
        _: &workerid::Namespace,
        _: u32,
        _: &workerid::Token,
        _: Duration,
        _: &workerid::Holder,
    ) -> workerid::Result<workerid::Grant> {
        std::future::pending().await
    }
    async fn renew(
        &self,
        _: &workerid::Namespace,
        _: workerid::WorkerId,
        _: &workerid::Token,
        _: Duration,
        _: u64,
    ) -> workerid::Result<()> {
        std::future::pending().await
    }
    async fn release(
        &self,
        _: &workerid::Namespace,
        _: workerid::WorkerId,
        _: &workerid::Token,
        _: u64,
    ) -> workerid::Result<()> {
        std::future::pending().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_caller_stopped_waiting_for_is_recorded_as_cancelled() {
    observed();
    let labels = observe::StoreLabels::new("hanging").with_address("10.0.0.9:1");
    let store = observe::Instrumented::new(Hanging, labels);
    let options = lease_options(Duration::from_secs(5)).request_timeout(Duration::from_millis(50));
    let allocator = Allocator::new(store, "observe-hanging", options).unwrap();
    let err = allocator.acquire().await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    let errors = [
        ("store", "hanging"),
        ("operation", "acquire"),
        ("error_type", "cancelled"),
    ];
    assert_eq!(counter(observe::STORE_ERRORS, &errors), 1);
    let timed = [("store", "hanging"), ("operation", "acquire")];
    assert_eq!(histogram_len(observe::STORE_OPERATION_SECONDS, &timed), 1);
    let spans = spans("workerid.store", "server.address", "10.0.0.9:1");
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].field("error.type"), Some("cancelled"));
}

/// The memory store, whose next renewals fail with `Unavailable` while
/// `failing` counts them down.
#[derive(Debug)]
struct RenewalsFail {
    inner: Arc<workerid::memory::MemoryStore>,
    failing: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl workerid::LeaseStore for RenewalsFail {
    fn capabilities(&self) -> workerid::Capabilities {
        self.inner.capabilities()
    }
    async fn acquire(
        &self,
        namespace: &workerid::Namespace,
        max_worker_id: u32,
        token: &workerid::Token,
        ttl: Duration,
        holder: &workerid::Holder,
    ) -> workerid::Result<workerid::Grant> {
        self.inner
            .acquire(namespace, max_worker_id, token, ttl, holder)
            .await
    }
    async fn renew(
        &self,
        namespace: &workerid::Namespace,
        id: workerid::WorkerId,
        token: &workerid::Token,
        ttl: Duration,
        watermark: u64,
    ) -> workerid::Result<()> {
        let fail = |n: u32| n.checked_sub(1);
        let ordering = std::sync::atomic::Ordering::SeqCst;
        if self.failing.fetch_update(ordering, ordering, fail).is_ok() {
            return Err(workerid::Error::unavailable("test", "no answer"));
        }
        self.inner.renew(namespace, id, token, ttl, watermark).await
    }
    async fn release(
        &self,
        namespace: &workerid::Namespace,
        id: workerid::WorkerId,
        token: &workerid::Token,
        watermark: u64,
    ) -> workerid::Result<()> {
        self.inner.release(namespace, id, token, watermark).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_retried_after_the_store_did_not_answer_is_counted() {
    observed();
    let ns = "observe-retried";
    let store = Arc::new(RenewalsFail {
        inner: Arc::new(workerid::memory::MemoryStore::new()),
        failing: std::sync::atomic::AtomicU32::new(0),
    });
    let allocator =
        Allocator::new(store.clone(), ns, lease_options(Duration::from_secs(3))).unwrap();
    let options = WorkerOptions::new().retry_every(Duration::from_millis(50));
    let worker = Worker::join(allocator, options).await.unwrap();
    let retries = || counter(observe::WORKER_RENEWAL_RETRIES, &[("namespace", ns)]);
    assert_eq!(retries(), 0);
    store.failing.store(2, std::sync::atomic::Ordering::SeqCst);
    eventually("two renewals retried", || retries() == 2).await;
    let renewed = [("namespace", ns), ("outcome", "ok")];
    let before = counter(observe::LEASE_RENEWALS, &renewed);
    eventually("a renewal after the retries", || {
        counter(observe::LEASE_RENEWALS, &renewed) > before
    })
    .await;
    assert_eq!(retries(), 2);
    worker.next_id().unwrap();
    assert_eq!(worker.stop().await, WorkerState::Stopped);
}
