//! A snowflake worker on the in-process store: `cargo run --example worker_memory`.

#[path = "support/run.rs"]
mod support;

use std::time::Duration;

use workerid::{memory::MemoryStore, Allocator, Error, LeaseOptions};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let options = LeaseOptions::new()
        .ttl(Duration::from_secs(10))
        .max_lease_time(Duration::from_secs(60));
    support::run(Allocator::new(MemoryStore::new(), "example", options)?).await
}
