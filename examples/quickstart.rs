//! Quick start: snowflake IDs on a leased worker ID, and segment IDs, from
//! the in-process store. Run with `cargo run --example quickstart`.
//!
//! Swap `"memory://"` for a shared store's URL (`redis://...`,
//! `postgres://...`, `etcd://...`, with that store's feature) and the same
//! code runs on many machines without two of them ever issuing one ID.

use std::time::{Duration, UNIX_EPOCH};

use workerid::segment::{SegmentAllocator, SegmentOptions};
use workerid::snowflake::{Worker, WorkerOptions};
use workerid::{Allocator, LeaseOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = workerid::open("memory://").await?;

    // Snowflake IDs: lease a worker ID in the namespace "orders" (the lease
    // is renewed in the background), then make IDs without any I/O.
    let options = LeaseOptions::new().ttl(Duration::from_secs(30));
    let allocator = Allocator::new(store.clone(), "orders", options)?;
    let worker = Worker::join(allocator, WorkerOptions::new()).await?;
    println!(
        "leased worker ID {} (fence {})",
        worker.worker_id(),
        worker.fence()
    );
    let layout = worker.generator().layout();
    for _ in 0..3 {
        let id = worker.next_id()?;
        let parts = layout.decompose(id);
        let unix_ms = parts.time.duration_since(UNIX_EPOCH)?.as_millis();
        println!(
            "  snowflake {id}: time {unix_ms} ms since 1970, worker {}, sequence {}",
            parts.worker_id, parts.sequence
        );
    }

    // Segment IDs (Leaf-segment): ranges of a per-tag counter, served from
    // memory; the next range is fetched before this one runs out.
    let segments = SegmentAllocator::new(store, SegmentOptions::default());
    segments.create_tag("invoices", 1_000, 100).await?;
    let invoice = segments.tag("invoices")?;
    for _ in 0..3 {
        println!("  invoice number {}", invoice.next_id().await?);
    }

    // A clean stop: unused segment IDs go back to the store, the worker ID
    // is released for the next process.
    segments.shutdown().await;
    let state = worker.stop().await;
    println!("stopped: {state:?}");
    Ok(())
}
