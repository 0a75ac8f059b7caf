//! The gRPC API (`workerid-proto`), on a port of its own
//! (`grpc_listen`): `workerid.v1.Ids` (IDs one at a time, in batches or as
//! a stream, from the HTTP API's tags and buffers), `workerid.v1.Leases`
//! (worker-ID leases in the server's store), `workerid.v1.Segments` (its
//! segment counters, for clients with buffers of their own) and the standard
//! `grpc.health.v1.Health` (see [`statuses`]).
//!
//! A port of its own rather than the HTTP port: gRPC needs HTTP/2, while the
//! HTTP port answers go-id-alloc's and Leaf's HTTP/1.1 clients on a fast
//! path of its own.

mod ids;
mod incoming;
mod leases;
mod page;
mod receipts;
mod segments;
mod status;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;
use tracing::Instrument;
use workerid::snowflake::Layout;
use workerid::LeaseStore;

use crate::auth::BearerTokens;
use crate::routes::App;
use workerid_proto::v1::ids_server::IdsServer;
use workerid_proto::v1::leases_server::LeasesServer;
use workerid_proto::v1::segments_server::SegmentsServer;

/// TLS on the gRPC port: the server's certificate chain and key, and the CA
/// client certificates must be signed by (none: no client certificates).
pub struct Tls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub client_ca_pem: Option<Vec<u8>>,
}

impl Tls {
    /// The files `config` names, read; `None` without TLS.
    ///
    /// # Errors
    /// A message naming the file that cannot be read.
    pub fn load(config: &crate::config::Config) -> Result<Option<Tls>, String> {
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let (Some(cert), Some(key)) = (&config.grpc_tls_cert, &config.grpc_tls_key) else {
            return Ok(None);
        };
        let tls = Tls {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            client_ca_pem: config.grpc_tls_client_ca.as_deref().map(read).transpose()?,
        };
        // Refused here, before anything listens: a bad certificate or key
        // would otherwise leave a server that speaks no gRPC at all.
        tonic::transport::Server::builder()
            .tls_config(tls.server_config())
            .map_err(|e| format!("grpc_tls_cert / grpc_tls_key: {e}"))?;
        Ok(Some(tls))
    }

    fn server_config(&self) -> tonic::transport::ServerTlsConfig {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let config =
            ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        match &self.client_ca_pem {
            Some(ca) => config.client_ca_root(Certificate::from_pem(ca)),
            None => config,
        }
    }
}

/// How often the health service's answer follows readiness.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

/// How the gRPC port serves, from the config.
/// The layout of the server's snowflake IDs, as `Ids.Layout` tells it.
#[derive(Debug, Clone)]
pub struct SnowflakeLayout {
    /// The `[snowflake] layout` setting.
    pub name: String,
    /// The layout itself.
    pub layout: Layout,
    /// The namespace and `max_worker_id` its worker IDs are leased from;
    /// `None` with snowflake off.
    pub pool: Option<(String, u32)>,
}

pub struct Options {
    /// TLS, if any.
    pub tls: Option<Tls>,
    /// A connection silent this long is pinged, and closed when the ping
    /// goes unanswered as long: nothing else would free the streams of a
    /// client that vanished without a word.
    pub keepalive: Duration,
    /// The key give-back receipts are signed with (none: a random one).
    pub give_back_key: Option<String>,
    /// The snowflake IDs' layout, for `Decode` and `Layout`.
    pub layout: SnowflakeLayout,
    /// The most connections open at once.
    pub max_open_connections: usize,
    /// How long a write to a client may make no progress.
    pub write_timeout: Duration,
    /// The bearer token of the operator's calls, if one is set.
    pub operator_token: BearerTokens,
}

/// Serves the gRPC API on `listener` until `shutdown` completes: streams
/// then end with `UNAVAILABLE` (`shutting_down`) and calls in flight
/// finish.
///
/// # Errors
/// The transport's error, as text: a certificate or key it cannot use, or
/// serving failed.
pub async fn serve(
    listener: TcpListener,
    options: Options,
    app: Arc<App>,
    leases: Arc<dyn LeaseStore>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let receipts = receipts::Receipts::new(options.give_back_key.as_deref());
    let snowflake = options.layout.pool.as_ref().map(|(namespace, _)| {
        leases::SnowflakeWatermarks::new(namespace, &options.layout.name, &options.layout.layout)
    });
    let (stop_streams, streams_stop) = watch::channel(false);
    let ids = IdsService {
        app: app.clone(),
        layout: options.layout,
        shutdown: streams_stop,
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    let watch_health = tokio::spawn(follow_readiness(app.clone(), reporter));
    let tokens = Tokens {
        auth: app.auth_tokens.clone(),
        operator: options.operator_token.clone(),
    };
    let check = {
        let tokens = tokens.clone();
        move |request: Request<()>| authorize(&tokens, request)
    };
    let shutdown = async move {
        shutdown.await;
        stop_streams.send_replace(true);
    };
    let limits = incoming::ConnectionLimits {
        max_open: options.max_open_connections,
        write_timeout: options.write_timeout,
        keepalive: options.keepalive,
    };
    let mut server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(options.keepalive))
        .http2_keepalive_timeout(Some(options.keepalive));
    if let Some(tls) = &options.tls {
        server = server
            .tls_config(tls.server_config())
            .map_err(|e| format!("gRPC TLS: {e}"))?;
    }
    let served = server
        .add_service(health)
        .add_service(IdsServer::with_interceptor(ids, check.clone()))
        .add_service(LeasesServer::with_interceptor(
            LeasesService {
                store: leases,
                tokens: tokens.clone(),
                snowflake,
            },
            check.clone(),
        ))
        .add_service(SegmentsServer::with_interceptor(
            SegmentsService {
                store: app.segments.store().clone(),
                receipts,
                tags: app.tags.clone(),
                tokens,
            },
            check,
        ))
        .serve_with_incoming_shutdown(incoming::incoming(listener, limits), shutdown)
        .await;
    watch_health.abort();
    served.map_err(|e| format!("gRPC: {e}"))
}

use ids::IdsService;
use leases::LeasesService;
use segments::SegmentsService;

/// The bearer tokens calls are checked against (their `Debug` shows none).
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    /// Every call's (`auth_token`), if set.
    pub auth: BearerTokens,
    /// The operator's calls' (`operator_token`), if set: they take one of
    /// these alone, and any call may carry one.
    pub operator: BearerTokens,
}

impl Tokens {
    /// Refuses an operator's call (a forced release, a namespace removed, a
    /// tag created) without the operator token, when one is set:
    /// `PERMISSION_DENIED`. Every call passed [`authorize`] already.
    #[allow(clippy::result_large_err)]
    pub fn operator<T>(&self, request: &Request<T>) -> Result<(), Status> {
        if self.operator.is_required() && !self.operator.accept(bearer(request.metadata())) {
            return Err(status::status(
                tonic::Code::PermissionDenied,
                "operator_token_required",
                "this call needs the operator token",
            ));
        }
        Ok(())
    }
}

/// The `authorization` metadata's bytes.
fn bearer(metadata: &tonic::metadata::MetadataMap) -> Option<&[u8]> {
    metadata.get("authorization").map(|v| v.as_bytes())
}

/// Refuses a call without the bearer token (when one is set) or the
/// operator's, as the HTTP API does: `UNAUTHENTICATED`, counted in the
/// request metrics.
#[allow(clippy::result_large_err)]
fn authorize(tokens: &Tokens, request: Request<()>) -> Result<Request<()>, Status> {
    if !tokens.auth.is_required() {
        return Ok(request);
    }
    let header = bearer(request.metadata());
    if tokens.operator.accept(header) || tokens.auth.accept(header) {
        return Ok(request);
    }
    crate::telemetry::record_request(
        metrics::SharedString::const_str("grpc"),
        401,
        Instant::now(),
    );
    Err(status::status(
        tonic::Code::Unauthenticated,
        "unauthorized",
        "a missing or wrong bearer token",
    ))
}

/// Runs a call's `answer` in its request span, counting and timing it
/// under its method with the HTTP status its gRPC status stands for.
async fn observed<T>(
    method: &'static str,
    answer: impl Future<Output = Result<T, Status>>,
) -> Result<Response<T>, Status> {
    let started = Instant::now();
    let span = crate::telemetry::request_span(method);
    let answer = answer.instrument(span.clone()).await;
    let code = answer
        .as_ref()
        .map_or_else(Status::code, |_| tonic::Code::Ok);
    let status = status::http_equivalent(code);
    crate::telemetry::end_request_span(&span, status);
    crate::telemetry::record_request(metrics::SharedString::const_str(method), status, started);
    answer.map(Response::new)
}

/// The health service's answer for each service, by what that service
/// needs:
/// - the server as a whole (`""`) and `Ids`, which serves snowflake and
///   segment IDs, as `/readyz` would answer;
/// - `Segments`, whose calls go to the store itself, while the tag list
///   was read from the store lately;
/// - `Leases` always: each call answers from the store itself, and the
///   snowflake worker's state (its own lease, in a pool that may be full)
///   says nothing about them.
fn statuses(app: &App) -> [(&'static str, ServingStatus); 4] {
    let serving = |yes: bool| {
        if yes {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    };
    let ready = serving(app.not_ready().is_empty());
    [
        ("", ready),
        (
            <IdsServer<IdsService> as tonic::server::NamedService>::NAME,
            ready,
        ),
        (
            <LeasesServer<LeasesService> as tonic::server::NamedService>::NAME,
            ServingStatus::Serving,
        ),
        (
            <SegmentsServer<SegmentsService> as tonic::server::NamedService>::NAME,
            serving(app.tags.fresh()),
        ),
    ]
}

/// Keeps the health service's answers on [`statuses`].
async fn follow_readiness(app: Arc<App>, reporter: tonic_health::server::HealthReporter) {
    let mut last = None;
    loop {
        let now = statuses(&app);
        if last != Some(now) {
            for (service, status) in now {
                reporter.set_service_status(service, status).await;
            }
            last = Some(now);
        }
        tokio::time::sleep(HEALTH_EVERY).await;
    }
}
