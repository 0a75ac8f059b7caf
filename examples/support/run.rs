//! What every worker example does once it has an allocator: join as a
//! snowflake worker, print an ID a second, and on Ctrl-C or SIGTERM (what
//! Kubernetes sends before it kills a pod) stop and release the worker ID.

use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, Error};

pub async fn run(allocator: Allocator) -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let worker = Worker::join(allocator, WorkerOptions::new()).await?;
    println!("joined as worker {}; Ctrl-C to stop", worker.worker_id());
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| Error::unavailable("signal", e))?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => match worker.next_id() {
                Ok(id) => {
                    let parts = worker.generator().layout().decompose(id);
                    let unix_ms = parts.time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
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
