//! A snowflake worker on Redis:
//! `WORKERID_REDIS_URL=redis://127.0.0.1:6379/ cargo run --example worker_redis`.

#[path = "support/run.rs"]
mod support;

use std::time::Duration;

use workerid::{Allocator, Error, LeaseOptions};
use workerid_redis::RedisStore;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url =
        std::env::var("WORKERID_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let store = match RedisStore::connect(&url).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("no Redis answers at {url} ({e}); start one or set WORKERID_REDIS_URL");
            std::process::exit(2);
        }
    };
    let options = LeaseOptions::new()
        .ttl(Duration::from_secs(10))
        .max_lease_time(Duration::from_secs(60));
    support::run(Allocator::new(store, "example", options)?).await
}
