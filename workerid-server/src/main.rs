//! `workerid-server`: an HTTP ID service (go-id-alloc's and Leaf's APIs).
//!
//! ```text
//! workerid-server [--config FILE] [--store URL] [--listen ADDR] [--workers N] ...
//! ```
//!
//! With no config: a SQLite file `workerid.db` in the working directory, a
//! tag `test`, and 127.0.0.1:8880 (go-id-alloc's port), so
//! `curl 'localhost:8880/alloc?biz_tag=test'` works with no server at all.
//!
//! Every setting of the TOML file but the tag list is also a flag and an
//! environment variable (`--help` lists them): `WORKERID_STORE` (its value,
//! which may hold a password, is never shown), `WORKERID_LISTEN`,
//! `WORKERID_WORKERS`, `WORKERID_AUTH_TOKEN`, `WORKERID_LOG_FORMAT`
//! (`text` or `json`), `WORKERID_STORE_TIMEOUT_MS`, ... The settings:
//!
//! | setting | default | |
//! | --- | --- | --- |
//! | `store_timeout_ms` | 3000 | one segment store call; past it, HTTP 500 (`store_unavailable`) |
//! | `tags_refresh_ms` | 5000 | how often the tag list is reread; unknown names are answered from it |
//! | `allow_volatile_segments` | false | serve segments from a store that is not durable, with a warning |
//! | `fast_path` | true | `/alloc` off the socket; false: everything through hyper |
//! | `idle_timeout_ms` | 60000 | an idle keep-alive connection closes |
//! | `max_open_connections` | 10000 | accepting waits at the cap |
//! | `max_buffer_bytes` | 65536 | read-ahead and pending answers per connection |
//! | `give_back_key` | random | the secret gRPC ranges are signed with, so a give-back is taken only for a client's own range |
//! | `grpc_keepalive_ms` | 10000 | a silent gRPC connection is pinged, and closed when the ping goes unanswered as long |
//! | `auth_token` | none | every request needs `Authorization: Bearer <token>`, the token or one of a list of them (to rotate them); visible ASCII only |
//! | `operator_token` | none | gRPC's operator calls take this token (or one of a list) alone |
//! | `[snowflake] ttl_secs` | 10 | the lease ttl, 1 to 86 400 (a day) |
//! | `[snowflake] renew_every_ms` | ttl/3 | |
//! | `[snowflake] renew_timeout_ms` | renew_every/2 | must be shorter than renew_every |
//! | `[snowflake] layout` | classic | the IDs' layout: classic, twitter (Leaf's), sonyflake, sonyflake-v2, discord, instagram, js-safe |
//! | `[snowflake] max_worker_id` | the layout's largest, at most 1023 | the pool |
//!
//! Segments need a durable store: on one whose counters do not survive its
//! restart (Redis without `durable=true` in its URL, an in-memory SQLite
//! database), the server refuses to start, saying what to change, unless
//! `allow_volatile_segments = true` (`WORKERID_ALLOW_VOLATILE_SEGMENTS=true`)
//! accepts that a restarted store hands out IDs again; it then logs a
//! warning.
//!
//! The snowflake worker is supervised: after a failed start or a lost lease
//! it joins again (backoff 100 ms to 1 s, jittered), on a store connection
//! of its own. `/livez` answers while the process runs; `/readyz` is 200
//! while, with snowflake on, the worker can issue IDs (a store that stopped
//! answering is no reason by itself: segments are served from memory).
//! Error bodies carry a stable code and message; store details go to the
//! log only.

mod auth;
mod batch;
mod cli;
mod config;
mod fast_path;
mod form;
mod grpc;
mod guarded;
mod probes;
mod rewind;
mod routes;
mod serve;
mod supervisor;
mod tags;
mod telemetry;
mod throttle;
mod traces;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cli::LogFormat;
use config::Config;
use routes::App;
use supervisor::Snowflake;
use tags::Tags;
use telemetry::{Counted, Metrics};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use workerid::segment::{SegmentAllocator, SegmentOptions, TimeLimited};
use workerid::snowflake::{DriftPolicy, WorkerOptions};
use workerid::{Allocator, LeaseOptions};

/// Why the server stopped with an error, and its exit code.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// A bad flag, file or value, or a config the store contradicts (exit 2).
    #[error("{0}")]
    Config(String),
    /// The store could not be opened (exit 3).
    #[error("{0}")]
    Store(String),
    /// The listen address could not be bound (exit 4).
    #[error("{0}")]
    Listen(String),
    /// Anything else (exit 1).
    #[error("{0}")]
    Other(String),
}

impl Failure {
    /// The documented exit code.
    fn exit_code(&self) -> i32 {
        match self {
            Failure::Other(_) => exit::FAILED,
            Failure::Config(_) => exit::CONFIG,
            Failure::Store(_) => exit::STORE,
            Failure::Listen(_) => exit::LISTEN,
        }
    }
}

/// The server's exit codes.
mod exit {
    /// Stopped by SIGTERM or Ctrl-C, after giving back and releasing.
    pub const OK: i32 = 0;
    /// Any other failure.
    pub const FAILED: i32 = 1;
    /// A bad flag, config file or value, or tags the store contradicts;
    /// nothing was written to the store.
    pub const CONFIG: i32 = 2;
    /// The store could not be opened (unreachable, credentials refused, no
    /// such database).
    pub const STORE: i32 = 3;
    /// The listen address could not be bound (in use, not an address).
    pub const LISTEN: i32 = 4;
}

/// Creates the start-up tags that are missing, after checking every one
/// against the store's list (read once): a tag that exists with another step
/// is refused before anything is written. Returns every tag name the store
/// has now.
async fn create_tags(
    segments: &SegmentAllocator,
    tags: &[config::TagConfig],
) -> Result<Vec<String>, Failure> {
    let stored = segments
        .store()
        .list_tags()
        .await
        .map_err(|e| Failure::Store(format!("tags: {e}")))?;
    let step_of = |name: &str| {
        stored
            .iter()
            .find(|t| t.tag.as_str() == name)
            .map(|t| t.step)
    };
    for tag in tags {
        if let Some(step) = step_of(&tag.name).filter(|&step| step != tag.step) {
            return Err(Failure::Config(format!(
                "tag {} exists with step {step}, the config says {}: change the config, \
                 or the stored tag",
                tag.name, tag.step
            )));
        }
    }
    let mut names: Vec<String> = stored.iter().map(|t| t.tag.as_str().to_owned()).collect();
    for tag in tags.iter().filter(|t| step_of(&t.name).is_none()) {
        let created = segments
            .create_tag(&tag.name, tag.first_id, tag.step)
            .await
            .map_err(|e| Failure::Store(format!("tag {}: {e}", tag.name)))?;
        tracing::info!(tag = %tag.name, created, "tag ready");
        names.push(tag.name.clone());
    }
    if names.is_empty() {
        tracing::warn!(
            "no tag: the store has none and the config names none ([[tags]]), so every \
             segment request answers unknown_tag until one is made"
        );
    }
    Ok(names)
}

/// The snowflake worker's allocator, on a store connection of its own, and
/// the label its leases carry.
///
/// # Errors
/// [`Failure::Config`] when the settings are not valid for the store (a ttl
/// shorter than its minimum, a pool wider than its worker bits, ...);
/// [`Failure::Store`] when the connection cannot be opened. Nothing is
/// written to the store.
async fn snowflake_allocator(config: &Config) -> Result<(Allocator, workerid::Holder), Failure> {
    let s = &config.snowflake;
    let layout = s.layout().map_err(Failure::Config)?;
    let options = LeaseOptions::new().max_worker_id(s.max_worker_id(&layout));
    let holder = s.holder().map_err(Failure::Config)?;
    let options = options
        .max_lease_time(s.ttl())
        .ttl(s.ttl())
        .request_timeout(s.renew_timeout())
        .holder(holder.clone());
    // The lease has a connection (or pool) of its own: no pattern of
    // requests can queue renewals behind segment calls. Each lease call is
    // bounded by the allocator's request timeout (the renew timeout).
    let lease_store = workerid::OpenOptions::new()
        .connect_timeout(Duration::from_secs(3))
        .request_timeout(s.renew_timeout())
        .max_connections(1)
        .open(&config.store)
        .await
        .map_err(|e| Failure::Store(format!("store (snowflake lease): {e}")))?
        .lease_store();
    let allocator = Allocator::from_arc(lease_store, &s.namespace, options)
        .map_err(|e| Failure::Config(format!("snowflake: {e}")))?;
    check_stored_pool(&allocator).await?;
    Ok((allocator, holder))
}

/// Refuses a pool that contradicts the one the namespace was first used
/// with: every join would fail with `ConfigMismatch`, so the server would
/// retry without end instead of saying so. A store that cannot list, or
/// does not answer now, leaves it to the joins (which log the error).
///
/// # Errors
/// [`Failure::Config`] naming both pools.
async fn check_stored_pool(allocator: &Allocator) -> Result<(), Failure> {
    if !allocator.store().capabilities().list {
        return Ok(());
    }
    let stored = match allocator.store().list(allocator.namespace()).await {
        Ok(listing) => listing.max_worker_id,
        Err(e) => {
            tracing::warn!("snowflake: could not read the namespace's pool at start: {e}");
            return Ok(());
        }
    };
    match stored {
        Some(stored) if stored != allocator.max_worker_id() => Err(Failure::Config(format!(
            "snowflake.max_worker_id {} contradicts namespace {:?}, whose pool is 0..={stored}: \
             every holder of a namespace uses one pool (set max_worker_id = {stored}, or use \
             another namespace)",
            allocator.max_worker_id(),
            allocator.namespace().as_str()
        ))),
        _ => Ok(()),
    }
}

/// Binds `address`: [`Failure::Config`] when it is not an address (exit
/// 2), [`Failure::Listen`] when it cannot be bound (exit 4).
async fn bind(address: &str) -> Result<tokio::net::TcpListener, Failure> {
    let addresses: Vec<_> = tokio::net::lookup_host(address)
        .await
        .map_err(|e| Failure::Config(format!("{address:?} is not an address to listen on: {e}")))?
        .collect();
    tokio::net::TcpListener::bind(&addresses[..])
        .await
        .map_err(|e| Failure::Listen(format!("cannot listen on {address}: {e}")))
}

async fn run(config: Config) -> Result<(), Failure> {
    // Before anything takes a metric handle.
    let metrics = Arc::new(Metrics::install().map_err(Failure::Other)?);
    metrics.spawn_upkeep();
    // Signals first: a SIGTERM while the store is opened or a worker ID is
    // joined still releases what was taken.
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| Failure::Other(e.to_string()))?;
    let (signalled_tx, mut signalled) = watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
        signalled_tx.send_replace(true);
        // A second signal is an operator who will not wait for the drain:
        // what was not given back is skipped, and the lease expires.
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::warn!(
            "a second signal: stopping at once; unused tails are skipped, the worker ID's \
             lease expires on its own"
        );
        std::process::exit(exit::FAILED);
    });
    // The address is bound before the store is touched: a bad one changes
    // nothing.
    let grpc_tls = grpc::Tls::load(&config).map_err(Failure::Config)?;
    let listener = bind(&config.listen).await?;
    let grpc_listener = match &config.grpc_listen {
        Some(address) => Some(bind(address).await?),
        None => None,
    };
    let store = workerid::OpenOptions::new()
        .connect_timeout(Duration::from_secs(3))
        .request_timeout(config.store_timeout())
        .max_connections(2)
        .open(&config.store)
        .await
        .map_err(|e| match e.is_bad_url() {
            true => Failure::Config(format!("store: {e}")),
            false => Failure::Store(format!("store: {e}")),
        })?;
    let segment_store = store.segment_store();
    let remote_leases = store.lease_store();
    if !config
        .check_segments_durable(store.kind(), segment_store.segment_capabilities().durable)
        .map_err(Failure::Config)?
    {
        tracing::warn!(
            store = store.kind().to_string(),
            "allow_volatile_segments: serving segments from a store that is not durable; \
             after a restart of the store, IDs already handed out will be handed out again"
        );
    }
    let counted = Counted {
        inner: TimeLimited::new(segment_store, config.store_timeout()),
        metrics: metrics.clone(),
    };
    let options = SegmentOptions {
        request_timeout: None,
        ..SegmentOptions::default()
    };
    let segments = SegmentAllocator::new(counted, options);
    // The allocator checks the lease settings against the store's
    // capabilities (its shortest ttl, its worker bits): a refusal must come
    // before the tags are written.
    let allocator = if config.snowflake.enabled {
        Some(snowflake_allocator(&config).await?)
    } else {
        None
    };
    let names = create_tags(&segments, &config.startup_tags()).await?;
    let tags = Arc::new(Tags::new(config.tags_refresh()));
    tags.replace(names);
    let (stop_snowflake, snowflake_stopped) = watch::channel(false);
    let refresher = tags::spawn_refresher(
        tags.clone(),
        segments.store().clone(),
        snowflake_stopped.clone(),
    );
    let snowflake = if let Some((allocator, holder)) = allocator {
        let s = &config.snowflake;
        // A clock that stepped back is answered at once (try later), never
        // waited out: the wait would block a thread serving requests, and
        // with `--workers 1` the only one, lease renewals included.
        let options = WorkerOptions::new()
            .layout(s.layout().map_err(Failure::Config)?)
            .drift(DriftPolicy::never_wait())
            .renew_every(s.renew_every());
        let pool_watch = allocator.clone();
        let snowflake = Arc::new(Snowflake::spawn(allocator, holder, options));
        // A worker ID released by the previous run is joined once the clock
        // passes its reserved window (under a ttl): waited for before
        // listening, so that the first snowflake request is answered.
        tokio::select! {
            () = snowflake.first_join(s.ttl()) => {}
            _ = signalled.wait_for(|&s| s) => {}
        }
        // After the first join: its first listing counts this server's lease.
        telemetry::spawn_pool_watch(pool_watch, snowflake_stopped.clone());
        Some(snowflake)
    } else {
        None
    };
    let app = Arc::new(App {
        segments,
        snowflake,
        metrics,
        tags,
        auth_tokens: config.auth_token.clone(),
        max_batch: config.max_batch,
    });
    tracing::info!("listening on {}", config.listen);
    let layout = config.snowflake.layout().map_err(Failure::Config)?;
    let snowflake_layout = grpc::SnowflakeLayout {
        name: config.snowflake.layout.clone(),
        layout,
        pool: config.snowflake.enabled.then(|| {
            (
                config.snowflake.namespace.clone(),
                config.snowflake.max_worker_id(&layout),
            )
        }),
    };
    let grpc = grpc_listener.map(|listener| {
        if let Some(address) = &config.grpc_listen {
            tracing::info!("gRPC listening on {address}");
        }
        let mut signalled = signalled.clone();
        let shutdown = async move {
            let _ = signalled.wait_for(|&s| s).await;
        };
        tokio::spawn(grpc::serve(
            listener,
            grpc::Options {
                tls: grpc_tls,
                keepalive: std::time::Duration::from_millis(config.grpc_keepalive_ms),
                give_back_key: config.give_back_key.clone(),
                layout: snowflake_layout,
                max_open_connections: config.max_open_connections,
                write_timeout: Duration::from_millis(config.idle_timeout_ms),
                operator_token: config.operator_token.clone(),
            },
            app.clone(),
            remote_leases,
            shutdown,
        ))
    });
    // HTTP and gRPC drain at once, from the signal, within one
    // DRAIN_TIMEOUT: the shutdown's whole budget is documented from it.
    let signalled_at = Arc::new(std::sync::OnceLock::new());
    let shutdown = {
        let signalled_at = signalled_at.clone();
        async move {
            let _ = signalled.wait_for(|&s| s).await;
            let _ = signalled_at.set(tokio::time::Instant::now());
        }
    };
    serve::serve(listener, app.clone(), config.limits(), shutdown).await;
    if let Some(mut grpc) = grpc {
        // It waits for every connection to close; one whose peer vanished
        // or stopped reading must not hold the release of the worker ID.
        let drained_by = signalled_at
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now)
            + serve::DRAIN_TIMEOUT;
        match tokio::time::timeout_at(drained_by, &mut grpc).await {
            Ok(Ok(Err(e))) => tracing::warn!("{e}"),
            Ok(Err(e)) => tracing::warn!("the gRPC server ended badly: {e}"),
            Ok(Ok(Ok(()))) => {}
            Err(_) => {
                tracing::warn!(
                    "gRPC connections still open {:?} after the signal: closing them",
                    serve::DRAIN_TIMEOUT
                );
                grpc.abort();
            }
        }
    }
    // Both bounded, whatever the store does: each give-back and the release
    // have their own timeout, and the whole give-back pass one more (its
    // calls run one tag after another).
    stop_snowflake.send_replace(true);
    let give_back = tokio::time::timeout(config.store_timeout() * 2, app.segments.shutdown());
    let release = async {
        if let Some(snowflake) = &app.snowflake {
            snowflake.stop(config.snowflake.renew_timeout() * 2).await;
        }
    };
    let (given_back, ()) = tokio::join!(give_back, release);
    refresher.abort();
    if given_back.is_err() {
        tracing::warn!(
            "the store did not take the segment tails back in time: those IDs are skipped"
        );
    }
    tracing::info!("stopped");
    Ok(())
}

/// One thread: a current-thread runtime (no work stealing to pay for);
/// more: the multi-thread one.
fn runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    match workers {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
        None => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
}

fn main() {
    let cli = cli::Cli::parse();
    if let Some(shell) = cli.completions {
        use clap::CommandFactory;
        let mut command = cli::Cli::command();
        clap_complete::generate(
            shell,
            &mut command,
            "workerid-server",
            &mut std::io::stdout(),
        );
        std::process::exit(exit::OK);
    }
    let config = match cli.config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("workerid-server: {e}");
            std::process::exit(exit::CONFIG);
        }
    };
    let runtime = match runtime(config.workers) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("workerid-server: cannot start the runtime: {e}");
            std::process::exit(exit::FAILED);
        }
    };
    let traces = {
        // The trace exporter's channel runs on the runtime.
        let _runtime = runtime.enter();
        match init_logging(cli.log_format, config.otlp_endpoint.as_deref()) {
            Ok(traces) => traces,
            Err(e) => {
                eprintln!("workerid-server: {e}");
                std::process::exit(exit::CONFIG);
            }
        }
    };
    let result = runtime.block_on(run(config));
    #[cfg(not(feature = "otlp"))]
    let _ = traces;
    #[cfg(feature = "otlp")]
    if let Some(traces) = traces {
        // Flushed while the runtime still drives the exporter's channel.
        runtime.block_on(async {
            let flush = tokio::task::spawn_blocking(move || traces.shutdown());
            let _ = tokio::time::timeout(Duration::from_secs(5), flush).await;
        });
    }
    // Tasks still blocked on a hung store are not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Err(e) = result {
        eprintln!("workerid-server: {e}");
        std::process::exit(e.exit_code());
    }
    std::process::exit(exit::OK);
}

#[cfg(feature = "otlp")]
type Traces = traces::Traces;
#[cfg(not(feature = "otlp"))]
type Traces = std::convert::Infallible;

/// Text or JSON lines on stdout (colour only when stdout is a terminal),
/// and the spans to `otlp_endpoint` when it is set.
fn init_logging(format: LogFormat, otlp_endpoint: Option<&str>) -> Result<Option<Traces>, String> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let lines = match format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_ansi(false)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stdout().is_terminal())
            .boxed(),
    };
    let registry = tracing_subscriber::registry().with(filter).with(lines);
    #[cfg(feature = "otlp")]
    if let Some(endpoint) = otlp_endpoint {
        let (traces, layer) = traces::layer(endpoint)?;
        registry.with(layer).init();
        return Ok(Some(traces));
    }
    #[cfg(not(feature = "otlp"))]
    let _ = otlp_endpoint;
    registry.init();
    Ok(None)
}
