//! The HTTP API: go-id-alloc's, Leaf's, and metrics.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::Uri;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use percent_encoding::percent_decode_str;
use serde::Serialize;
use tracing::Instrument;
use workerid::segment::{self, SegmentAllocator};
use workerid::snowflake;

use crate::auth::BearerTokens;
use crate::batch::{self, BadBatch, Batch};
use crate::form::Params;
use crate::supervisor::Snowflake;
use crate::tags::Tags;
use crate::telemetry::Metrics;
use crate::throttle::Throttle;

/// What the handlers share.
pub struct App {
    pub segments: SegmentAllocator,
    /// The snowflake worker's supervisor's view (None when disabled).
    pub snowflake: Option<Arc<Snowflake>>,
    pub metrics: Arc<Metrics>,
    /// Which tags exist: unknown names are answered from it.
    pub tags: Arc<Tags>,
    /// The bearer tokens of which every request must carry one, if any.
    pub auth_tokens: BearerTokens,
    /// The most IDs one request may ask for (`count`).
    pub max_batch: u64,
}

/// What a request fails with: the segment allocator's or the snowflake
/// worker's error.
#[derive(Debug)]
pub enum Failure {
    Segment(segment::Error),
    Snowflake(snowflake::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Segment(e) => e.fmt(f),
            Failure::Snowflake(e) => e.fmt(f),
        }
    }
}

impl From<segment::Error> for Failure {
    fn from(e: segment::Error) -> Self {
        Failure::Segment(e)
    }
}

impl From<snowflake::Error> for Failure {
    fn from(e: snowflake::Error) -> Self {
        Failure::Snowflake(e)
    }
}

impl From<snowflake::NextIdError> for Failure {
    fn from(e: snowflake::NextIdError) -> Self {
        Failure::Snowflake(e.into())
    }
}

impl App {
    /// The next ID of `tag`. A name the view does not know is answered
    /// without a store call and leaves no allocator state behind.
    pub async fn next_segment_id(&self, tag: &str) -> Result<u64, segment::Error> {
        if !self.tags.known(tag) {
            return Err(segment::Error::UnknownTag { tag: tag.into() });
        }
        let answer = self.segments.next_id(tag).await;
        if let Err(segment::Error::UnknownTag { .. }) = &answer {
            // Deleted from the store since the last refresh.
            self.tags.found_missing(tag);
        }
        answer
    }

    /// `count` IDs of `tag`, as runs of consecutive IDs; like
    /// [`next_segment_id`](Self::next_segment_id).
    pub async fn next_segment_ids(
        &self,
        tag: &str,
        count: u64,
    ) -> Result<Vec<std::ops::Range<u64>>, segment::Error> {
        if !self.tags.known(tag) {
            return Err(segment::Error::UnknownTag { tag: tag.into() });
        }
        let answer = self.segments.next_ids(tag, count).await;
        if let Err(segment::Error::UnknownTag { .. }) = &answer {
            self.tags.found_missing(tag);
        }
        if let Ok(runs) = &answer {
            let ids: u64 = runs.iter().map(|r| r.end - r.start).sum();
            self.metrics.segment_ids.fetch_add(ids, Ordering::Relaxed);
        }
        answer
    }

    /// Why the server cannot serve now (empty: ready), what `/readyz` and
    /// the gRPC health service report: the snowflake worker's state. A
    /// store that does not answer is no reason by itself: segments are
    /// served from memory meanwhile, and every server shares the store, so
    /// taking them all out of a balancer would only end what still works.
    pub fn not_ready(&self) -> Vec<String> {
        let mut not_ready = Vec::new();
        if let Some(Err(reason)) = self.snowflake.as_ref().map(|s| s.status()) {
            not_ready.push(format!("snowflake worker: {reason}"));
        }
        not_ready
    }

    /// `count` snowflake IDs, as runs of consecutive IDs.
    pub fn next_snowflakes(&self, count: u64) -> Result<Vec<std::ops::Range<u64>>, Failure> {
        let Some(snowflake) = &self.snowflake else {
            return Err(Failure::Snowflake(snowflake::Error::NotReady {
                reason: "the snowflake worker is disabled".into(),
            }));
        };
        let ids = (0..count)
            .map(|_| snowflake.next_id())
            .collect::<Result<Vec<u64>, _>>()?;
        self.metrics
            .snowflake_ids
            .fetch_add(count, Ordering::Relaxed);
        Ok(batch::runs(ids))
    }
}

/// go-id-alloc's answer, with its fields in its order: `id` on `/alloc`,
/// `left` on `/health`, in failures too (as 0), and this server's stable
/// error code after them.
#[derive(Serialize)]
pub struct Reply {
    errno: i32,
    msg: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    left: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
}

/// Which of go-id-alloc's endpoints answers: it decides the field a
/// failure carries (`id` or `left`).
#[derive(Clone, Copy)]
enum Endpoint {
    Alloc,
    Health,
}

/// A failure on go-id-alloc's endpoints: HTTP 500, as go-id-alloc answers
/// every error, so that its clients and load balancers see one.
struct Failed(Reply);

impl Failed {
    fn new(endpoint: Endpoint, errno: i32, code: &'static str, msg: String) -> Failed {
        let (id, left) = match endpoint {
            Endpoint::Alloc => (Some(0), None),
            Endpoint::Health => (None, Some(0)),
        };
        Failed(Reply {
            errno,
            msg,
            id,
            left,
            code: Some(code),
        })
    }

    fn body(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|e| {
            tracing::error!("could not serialise an answer: {e}");
            r#"{"errno":2,"msg":"internal error"}"#.into()
        })
    }
}

impl IntoResponse for Failed {
    fn into_response(self) -> Response {
        let body = self.body();
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(CONTENT_TYPE, JSON.clone())],
            body,
        )
            .into_response()
    }
}

/// go-id-alloc's error numbers.
const MISSING_TAG: i32 = 1;
const FAILED: i32 = 2;
/// A `count` or `format` this server refuses (go-id-alloc has neither).
const BAD_BATCH: i32 = 3;

pub fn router(app: Arc<App>) -> Router {
    let routes = Router::new()
        // Any method, as go-id-alloc's and Leaf's servers take any.
        .route("/alloc", any(alloc_route))
        .route("/health", any(health))
        .route("/api/segment/get/{key}", any(leaf_segment))
        .route("/api/snowflake/get/{key}", any(leaf_snowflake))
        .route("/metrics", get(metrics))
        .with_state(app.clone());
    let routes = if app.auth_tokens.is_required() {
        routes.layer(axum::middleware::from_fn_with_state(
            app.clone(),
            require_token,
        ))
    } else {
        routes
    };
    // The probes take no token, as the gRPC health service takes none: a
    // kubelet or a load balancer asks them, and they tell only whether to
    // send traffic.
    let probes = Router::new()
        .route("/livez", get(crate::probes::livez))
        .route("/readyz", get(crate::probes::readyz))
        .with_state(app);
    let routes = routes.merge(probes);
    // Outermost: requests refused for want of the token are counted too.
    routes.layer(axum::middleware::from_fn(record_request))
}

/// Counts and times every request by its route, in its request span (the
/// `/alloc` fast path records its own).
async fn record_request(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    // The route's template (`/api/segment/get/{key}`): a label of bounded
    // cardinality, whatever the paths asked for.
    let endpoint = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or(metrics::SharedString::const_str("other"), |p| {
            p.as_str().to_owned().into()
        });
    let started = std::time::Instant::now();
    let span = crate::telemetry::request_span(&endpoint);
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    crate::telemetry::end_request_span(&span, status);
    crate::telemetry::record_request(endpoint, status, started);
    response
}

/// Answers 401 to a request without one of the bearer tokens.
async fn require_token(
    State(app): State<Arc<App>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let header = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    match app.auth_tokens.is_required() && !app.auth_tokens.accept(header) {
        true => (
            StatusCode::UNAUTHORIZED,
            [(WWW_AUTHENTICATE, "Bearer")],
            "unauthorized: a missing or wrong bearer token\n",
        )
            .into_response(),
        false => next.run(request).await,
    }
}

fn failure(app: &App, endpoint: Endpoint, errno: i32, code: &'static str, msg: String) -> Failed {
    app.metrics.request_error(code);
    Failed::new(endpoint, errno, code, msg)
}

/// The failure of a request without `biz_tag`.
fn missing_tag(app: &App, endpoint: Endpoint) -> Failed {
    let msg = "missing parameter biz_tag".into();
    failure(app, endpoint, MISSING_TAG, "missing_tag", msg)
}

/// The failure `e` on `endpoint`.
fn failed(app: &App, endpoint: Endpoint, e: &Failure) -> Failed {
    let (code, msg) = public(e);
    failure(app, endpoint, FAILED, code, msg)
}

/// The first `biz_tag` of a query string, decoded, without building a map;
/// an empty one is missing, as go-id-alloc reads it.
fn biz_tag(query: Option<&str>) -> Option<Cow<'_, str>> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == "biz_tag")
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

/// The `Content-Type` of go-id-alloc's answers.
pub static JSON: HeaderValue = HeaderValue::from_static("application/json");

/// `GET /alloc?biz_tag=test` -> `{"errno":0,"msg":"success","id":201}`:
/// the status and body to answer with.
///
/// The hot path of the service (the fast path calls it off the socket): the
/// query is scanned for `biz_tag` without building a map, and the success
/// body is written without a serializer.
pub async fn alloc(app: &App, query: Option<&str>) -> (StatusCode, String) {
    let batch = match batch::parse(query, app.max_batch) {
        Ok(batch) => batch,
        Err(BadBatch { code, msg }) => {
            let refused = failure(app, Endpoint::Alloc, BAD_BATCH, code, msg);
            return (StatusCode::BAD_REQUEST, refused.body());
        }
    };
    let failed = match (biz_tag(query), batch) {
        (None, _) => missing_tag(app, Endpoint::Alloc),
        (Some(tag), Some(Batch { count, format })) => {
            match app.next_segment_ids(&tag, count).await {
                Ok(runs) => {
                    let field = match format {
                        batch::Format::Array => "ids",
                        batch::Format::Ranges => "ranges",
                    };
                    let ids = batch::json(&runs, format);
                    return (
                        StatusCode::OK,
                        format!(r#"{{"errno":0,"msg":"success","{field}":{ids}}}"#),
                    );
                }
                Err(e) => failed(app, Endpoint::Alloc, &Failure::Segment(e)),
            }
        }
        (Some(tag), None) => match app.next_segment_id(&tag).await {
            Ok(id) => {
                app.metrics.segment_ids.fetch_add(1, Ordering::Relaxed);
                return (
                    StatusCode::OK,
                    format!(r#"{{"errno":0,"msg":"success","id":{id}}}"#),
                );
            }
            Err(e) => failed(app, Endpoint::Alloc, &Failure::Segment(e)),
        },
    };
    (StatusCode::INTERNAL_SERVER_ERROR, failed.body())
}

/// `/alloc` through the router (on connections handed to hyper; the fast
/// path answers it first).
async fn alloc_route(State(app): State<Arc<App>>, Params(query): Params) -> Response {
    let (status, body) = alloc(&app, query.as_deref()).await;
    (status, [(CONTENT_TYPE, JSON.clone())], body).into_response()
}

/// `GET /health?biz_tag=test` -> `{"errno":0,"msg":"success","left":N}`:
/// IDs of the tag held in both buffers, 200 only when the tag can be served
/// now (a segment is loaded first if none is), HTTP 500 otherwise, as
/// go-id-alloc answers, so that a load balancer takes the node out.
async fn health(State(app): State<Arc<App>>, Params(query): Params) -> Response {
    let Some(tag) = biz_tag(query.as_deref()) else {
        return missing_tag(&app, Endpoint::Health).into_response();
    };
    let tag = tag.as_ref();
    // From the server's view of the tags, never the store: a request costs
    // no round trip whatever the name.
    if !app.tags.known(tag) {
        let e = segment::Error::UnknownTag { tag: tag.into() };
        return failed(&app, Endpoint::Health, &e.into()).into_response();
    }
    let filled = match app.segments.tag(tag) {
        Ok(handle) => handle.fill().await,
        Err(e) => Err(e),
    };
    match filled {
        Ok(left) => Json(Reply {
            errno: 0,
            msg: "success".into(),
            id: None,
            left: Some(left),
            code: None,
        })
        .into_response(),
        Err(e) => failed(&app, Endpoint::Health, &e.into()).into_response(),
    }
}

/// The warnings of failed requests: one a second at most.
static FAILED_REQUESTS: Throttle = Throttle::new(std::time::Duration::from_secs(1));

/// What a client is told of `e`: a stable code and a stable message. Store
/// details (addresses, driver messages) go to the log only.
pub fn public(e: &Failure) -> (&'static str, String) {
    use segment::Error as Seg;
    use snowflake::Error as Snow;
    let unavailable = ("store_unavailable", "store unavailable");
    let (code, msg) = match e {
        // No tag is longer: the client's text is not worth sending back.
        Failure::Segment(Seg::UnknownTag { tag }) if tag.len() > segment::MAX_TAG_LEN => {
            let msg = format!(
                "unknown tag: a name of {} bytes (a tag has at most {})",
                tag.len(),
                segment::MAX_TAG_LEN
            );
            return ("unknown_tag", msg);
        }
        Failure::Segment(Seg::UnknownTag { tag }) => {
            return ("unknown_tag", format!("unknown tag {tag:?}"))
        }
        Failure::Segment(Seg::InvalidConfig { .. }) => ("invalid_tag", "invalid tag name"),
        Failure::Segment(Seg::TagExhausted { .. }) => ("tag_exhausted", "tag exhausted"),
        Failure::Segment(Seg::Stopped { .. }) => ("shutting_down", "shutting down"),
        Failure::Segment(Seg::Unavailable { .. }) => unavailable,
        Failure::Snowflake(Snow::NotReady { reason }) => return ("not_ready", reason.to_string()),
        Failure::Snowflake(Snow::ClockDriftTryLater { .. } | Snow::ClockDriftTooLarge { .. }) => {
            ("clock_drift", "the clock moved backwards: try later")
        }
        Failure::Snowflake(Snow::Lease(workerid::Error::Unavailable { .. })) => unavailable,
        _ => ("internal", "internal error"),
    };
    // A client's bad tag and a lease gap (which /readyz and the metrics
    // already show) would flood the log exactly during an incident; every
    // other failure is worth a warning.
    match e {
        Failure::Segment(
            Seg::InvalidConfig { .. } | Seg::UnknownTag { .. } | Seg::Stopped { .. },
        )
        | Failure::Snowflake(Snow::NotReady { .. } | Snow::ClockDriftTryLater { .. }) => {
            tracing::debug!(code, "request failed: {e}")
        }
        // Once a second at most: a store down fails every request.
        _ => match FAILED_REQUESTS.pass() {
            Some(0) => tracing::warn!(code, "request failed: {e}"),
            Some(held) => {
                tracing::warn!(
                    code,
                    held,
                    "request failed: {e} ({held} more since the last such line)"
                )
            }
            None => tracing::debug!(code, "request failed: {e}"),
        },
    }
    (code, msg.into())
}

/// Leaf's error answer: HTTP 500, as Leaf answers every failure, and
/// `code: message` as plain text.
fn plain_error(app: &App, e: &Failure) -> Response {
    let (code, msg) = public(e);
    app.metrics.request_error(code);
    (StatusCode::INTERNAL_SERVER_ERROR, format!("{code}: {msg}")).into_response()
}

/// A refused `count` or `format` on Leaf's endpoints: HTTP 400, `code:
/// message` as plain text.
fn bad_batch(app: &App, BadBatch { code, msg }: BadBatch) -> Response {
    app.metrics.request_error(code);
    (StatusCode::BAD_REQUEST, format!("{code}: {msg}")).into_response()
}

/// A batch's IDs as JSON.
fn batch_reply(runs: &[std::ops::Range<u64>], format: batch::Format) -> Response {
    ([(CONTENT_TYPE, JSON.clone())], batch::json(runs, format)).into_response()
}

/// Leaf's `GET /api/segment/get/{key}`: the ID as plain text; with
/// `count`, that many as JSON.
async fn leaf_segment(State(app): State<Arc<App>>, uri: Uri, Params(query): Params) -> Response {
    // Decoded whatever the bytes, as Leaf's servlet does: a key that is not
    // UTF-8 is an unknown tag (500 with its code), not a routing error,
    // which axum's path extractors would make it.
    let raw = uri.path().rsplit('/').next().unwrap_or_default();
    let key = percent_decode_str(raw).decode_utf8_lossy();
    match batch::parse(query.as_deref(), app.max_batch) {
        Err(bad) => return bad_batch(&app, bad),
        Ok(Some(Batch { count, format })) => {
            return match app.next_segment_ids(&key, count).await {
                Ok(runs) => batch_reply(&runs, format),
                Err(e) => plain_error(&app, &e.into()),
            }
        }
        Ok(None) => {}
    }
    match app.next_segment_id(&key).await {
        Ok(id) => {
            app.metrics.segment_ids.fetch_add(1, Ordering::Relaxed);
            id.to_string().into_response()
        }
        Err(e) => plain_error(&app, &e.into()),
    }
}

/// Leaf's `GET /api/snowflake/get/{key}`: a snowflake ID as plain text (the
/// key is ignored, as in Leaf); with `count`, that many as JSON.
async fn leaf_snowflake(State(app): State<Arc<App>>, Params(query): Params) -> Response {
    match batch::parse(query.as_deref(), app.max_batch) {
        Err(bad) => return bad_batch(&app, bad),
        Ok(Some(Batch { count, format })) => {
            return match app.next_snowflakes(count) {
                Ok(runs) => batch_reply(&runs, format),
                Err(e) => plain_error(&app, &e),
            }
        }
        Ok(None) => {}
    }
    let Some(snowflake) = &app.snowflake else {
        let e = snowflake::Error::NotReady {
            reason: "the snowflake worker is disabled".into(),
        };
        return plain_error(&app, &Failure::Snowflake(e));
    };
    match snowflake.next_id() {
        Ok(id) => {
            app.metrics.snowflake_ids.fetch_add(1, Ordering::Relaxed);
            id.to_string().into_response()
        }
        Err(e) => plain_error(&app, &e.into()),
    }
}

async fn metrics(State(app): State<Arc<App>>) -> String {
    let (known, missing) = app.tags.sizes();
    let gauges = crate::telemetry::Gauges {
        tags_known: known,
        tags_missing: missing,
        tags_in_memory: app.segments.tags_in_memory().len(),
    };
    app.metrics.render(app.snowflake.as_deref(), &gauges)
}
