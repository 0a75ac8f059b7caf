//! A snowflake worker on etcd (the seed's `NewWorker(endpoints, prefix, ...)`):
//! `WORKERID_ETCD_ENDPOINTS=http://127.0.0.1:2379 cargo run --example worker_etcd`.
//! Several endpoints, comma-separated, for a cluster; `ETCD_USER` and
//! `ETCD_PASSWORD` for a cluster with authentication.

#[path = "support/run.rs"]
mod support;

use std::time::Duration;

use workerid::{Allocator, Error, LeaseOptions};
use workerid_etcd::EtcdStore;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let endpoints =
        std::env::var("WORKERID_ETCD_ENDPOINTS").unwrap_or_else(|_| "http://127.0.0.1:2379".into());
    let mut builder = EtcdStore::builder().key_prefix("example");
    if let (Ok(user), Ok(password)) = (std::env::var("ETCD_USER"), std::env::var("ETCD_PASSWORD")) {
        builder = builder.credentials(user, password);
    }
    let store = match builder.connect(endpoints.split(',')).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!(
                "no etcd answers at {endpoints} ({e}); start one or set WORKERID_ETCD_ENDPOINTS"
            );
            std::process::exit(2);
        }
    };
    // etcd leases count whole seconds, at least 2.
    let options = LeaseOptions::new()
        .ttl(Duration::from_secs(10))
        .max_lease_time(Duration::from_secs(60));
    support::run(Allocator::new(store, "example", options)?).await
}
