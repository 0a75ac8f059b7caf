//! A snowflake worker on SQL. With no settings it uses a SQLite file (no
//! server needed): `cargo run --example worker_sql`. Any other database:
//! `WORKERID_SQL_URL=postgres://user@host/db cargo run --example worker_sql`
//! (or `mysql://...`, `sqlite:///path?mode=rwc`).

#[path = "support/run.rs"]
mod support;

use std::time::Duration;

use workerid::{Allocator, Error, LeaseOptions};
use workerid_sql::SqlStore;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let default = format!(
        "sqlite://{}?mode=rwc",
        std::env::temp_dir().join("workerid-example.db").display()
    );
    let url = std::env::var("WORKERID_SQL_URL").unwrap_or(default);
    let store = match SqlStore::connect(&url).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("no database answers at {url} ({e}); set WORKERID_SQL_URL");
            std::process::exit(2);
        }
    };
    println!("leases in {url}");
    let options = LeaseOptions::new()
        .ttl(Duration::from_secs(10))
        .max_lease_time(Duration::from_secs(60));
    support::run(Allocator::new(store, "example", options)?).await
}
