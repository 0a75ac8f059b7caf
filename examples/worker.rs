//! A snowflake worker on any store, named by its URL:
//!
//! ```text
//! cargo run --example worker --features all -- redis://127.0.0.1:6379/
//! cargo run --example worker --features all -- postgres://me:secret@db/ids
//! cargo run --example worker --features all -- etcd://10.0.0.1:2379,10.0.0.2:2379
//! ```
//!
//! It prints an ID a second until Ctrl-C or SIGTERM (what Kubernetes sends
//! before it kills a pod), then stops and releases its worker ID.

use std::time::{Duration, UNIX_EPOCH};

use tokio::signal::unix::{signal, SignalKind};
use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, LeaseOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let Some(url) = std::env::args().nth(1) else {
        eprintln!(
            "usage: worker STORE_URL\n\nSTORE_URL is one of:\n{}",
            workerid::StoreKind::accepted_urls()
        );
        std::process::exit(2);
    };
    // The error names the URL with its password hidden.
    let store = workerid::open(&url).await?;
    let options = LeaseOptions::new()
        .ttl(Duration::from_secs(10))
        .max_lease_time(Duration::from_secs(60));
    let allocator = Allocator::new(store, "example", options)?;
    let worker = Worker::join(allocator, WorkerOptions::new()).await?;
    println!("joined as worker {}; Ctrl-C to stop", worker.worker_id());
    let mut terminate = signal(SignalKind::terminate())?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => match worker.next_id() {
                Ok(id) => {
                    let parts = worker.generator().layout().decompose(id);
                    let unix_ms = parts.time.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
                    println!("{id}  (worker {}, sequence {}, unix ms {unix_ms})", parts.worker_id, parts.sequence);
                }
                Err(e) => println!("no ID now: {e}"),
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
            state = worker.stopped() => {
                println!("the worker ended: {state:?}");
                return Ok(());
            }
        }
    }
    match worker.stop().await {
        WorkerState::Stopped => println!("stopped; worker ID released"),
        other => println!("stopped: {other:?}"),
    }
    Ok(())
}
