//! `workerid-server`: an HTTP ID service (go-id-alloc's and Leaf's APIs).
//!
//! ```text
//! workerid-server [--config FILE] [--listen ADDR]
//! ```
//!
//! With no config: a SQLite file `workerid.db` in the working directory, a
//! tag `test`, and 127.0.0.1:8880 (go-id-alloc's port), so
//! `curl 'localhost:8880/alloc?biz_tag=test'` works with no server at all.

mod config;
mod fast_path;
mod metrics;
mod rewind;
mod routes;
mod serve;
mod supervisor;
mod tags;

use std::sync::Arc;
use std::time::Duration;

use config::Config;
use metrics::{Counted, Metrics};
use routes::App;
use supervisor::Snowflake;
use tags::Tags;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use workerid::segment::{SegmentAllocator, SegmentOptions};
use workerid::snowflake::{DriftPolicy, WorkerOptions};
use workerid::{Allocator, LeaseOptions};

const USAGE: &str = "usage: workerid-server [--config FILE] [--listen ADDR] [--workers N]

  --config FILE   TOML: store = \"sqlite://...|postgres://...|mysql://...|redis://...|etcd://...\",
                  listen, [[tags]] name/first_id/step, [snowflake] enabled/namespace/ttl_secs
  --listen ADDR   overrides the config's listen address (default 127.0.0.1:8880)
  --workers N     threads serving requests, 1 to 1024 (default: one per CPU; config: workers)";

fn parse_args() -> Result<Config, String> {
    let mut args = std::env::args().skip(1);
    let mut config = Config::default();
    let mut listen = None;
    let mut workers = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--config" => {
                let path = args.next().ok_or("--config needs a file")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {path}: {e}"))?;
                config = toml::from_str(&text).map_err(|e| format!("bad config {path}: {e}"))?;
            }
            "--listen" => listen = Some(args.next().ok_or("--listen needs an address")?),
            "--workers" => {
                let n = args.next().ok_or("--workers needs a number")?;
                workers = Some(
                    n.parse()
                        .map_err(|_| format!("--workers: {n:?} is not a number"))?,
                );
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}\n\n{USAGE}")),
        }
    }
    if let Some(listen) = listen {
        config.listen = listen;
    }
    if workers.is_some() {
        config.workers = workers;
    }
    config.validate()?;
    Ok(config)
}

async fn run(config: Config) -> Result<(), String> {
    let store = workerid::OpenOptions::new()
        .connect_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(3))
        .max_connections(2)
        .open(&config.store)
        .await
        .map_err(|e| format!("store: {e}"))?;
    let segment_store = store.segment_store();
    let metrics = Arc::new(Metrics::default());
    let counted = Counted {
        inner: segment_store,
        metrics: metrics.clone(),
        timeout: config.store_timeout(),
    };
    let segments = SegmentAllocator::new(counted, SegmentOptions::default());
    for tag in &config.tags {
        let created = segments
            .create_tag(&tag.name, tag.first_id, tag.step)
            .await
            .map_err(|e| format!("tag {}: {e}", tag.name))?;
        tracing::info!(tag = %tag.name, created, "tag ready");
    }
    let tags = Arc::new(Tags::new(
        config.tags.iter().map(|t| t.name.clone()),
        config.tags_refresh(),
    ));
    if let Err(e) = tags.refresh(segments.store().as_ref()).await {
        tracing::warn!(
            "could not read the tag list, serving the config's tags until a refresh does: {e}"
        );
    }
    let (stop_snowflake, snowflake_stopped) = watch::channel(false);
    let refresher = tags::spawn_refresher(
        tags.clone(),
        segments.store().clone(),
        snowflake_stopped.clone(),
    );
    let (snowflake, supervisor) = if config.snowflake.enabled {
        let s = &config.snowflake;
        let mut options = LeaseOptions::new();
        if let Some(max) = s.max_worker_id {
            options = options.max_worker_id(max);
        }
        let options = options
            .max_lease_time(s.ttl())
            .ttl(s.ttl())
            .request_timeout(s.renew_timeout());
        // The lease has a connection (or pool) of its own: no pattern of
        // requests can queue renewals behind segment calls. Each lease call
        // is bounded by the allocator's request timeout (the renew timeout).
        let lease_store = workerid::OpenOptions::new()
            .connect_timeout(Duration::from_secs(3))
            .request_timeout(s.renew_timeout())
            .max_connections(1)
            .open(&config.store)
            .await
            .map_err(|e| format!("store (snowflake lease): {e}"))?
            .lease_store();
        let allocator = Allocator::from_arc(lease_store, &s.namespace, options)
            .map_err(|e| format!("snowflake: {e}"))?;
        // A clock that stepped back is answered at once (try later), never
        // waited out: the wait would block a thread serving requests, and
        // with `--workers 1` the only one, lease renewals included.
        let drift = DriftPolicy {
            block_below: Duration::ZERO,
            ..DriftPolicy::default()
        };
        let options = WorkerOptions::new()
            .drift(drift)
            .renew_every(s.renew_every());
        let snowflake = Arc::new(Snowflake::default());
        let supervisor = supervisor::spawn(
            snowflake.clone(),
            allocator,
            options,
            snowflake_stopped,
            s.renew_timeout() * 2,
        );
        // A worker ID released by the previous run is joined once the clock
        // passes its reserved window (under a ttl): wait for that before
        // listening, as a server that joined inline did.
        snowflake.first_join(s.ttl()).await;
        (Some(snowflake), Some(supervisor))
    } else {
        (None, None)
    };
    let app = Arc::new(App {
        segments,
        snowflake,
        metrics,
        tags,
    });
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    tracing::info!("listening on {}", config.listen);
    let mut terminate = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
    };
    serve::serve(listener, app.clone(), config.limits(), shutdown).await;
    // Both bounded, whatever the store does: each give-back and the release
    // have their own timeout, and the whole give-back pass one more (its
    // calls run one tag after another).
    stop_snowflake.send_replace(true);
    let give_back = tokio::time::timeout(config.store_timeout() * 2, app.segments.shutdown());
    let release = async {
        if let Some(supervisor) = supervisor {
            if let Err(e) = supervisor.await {
                tracing::warn!("the snowflake supervisor ended badly: {e}");
            }
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let config = match parse_args() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let runtime = match runtime(config.workers) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("workerid-server: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(run(config));
    // Tasks still blocked on a hung store are not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Err(e) = result {
        eprintln!("workerid-server: {e}");
        std::process::exit(1);
    }
}
