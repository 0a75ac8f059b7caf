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
use workerid::snowflake::{SupervisedWorker, WorkerOptions};
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
    // Kept joined: a lost lease (a store outage longer than the ttl, a
    // forced release) is followed by a new worker, maybe with another ID.
    let ids = SupervisedWorker::spawn(allocator, WorkerOptions::new());
    ids.wait_first_join(Duration::from_secs(30)).await;
    println!("Ctrl-C to stop");
    let mut terminate = signal(SignalKind::terminate())?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => match (ids.next_id(), ids.worker()) {
                (Ok(id), Some(worker)) => {
                    let parts = worker.generator().layout().decompose(id);
                    let unix_ms = parts.time.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
                    println!("{id}  (worker {}, sequence {}, unix ms {unix_ms})", parts.worker_id, parts.sequence);
                }
                (Ok(id), None) => println!("{id}"),
                (Err(e), _) => println!("no ID now: {e}"),
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        }
    }
    if ids.stop(Duration::from_secs(20)).await {
        println!("stopped; the worker ID is released (a refusal is logged)");
    } else {
        println!("stopped; the worker ID expires with its ttl");
    }
    Ok(())
}
