//! The factory every SQL test binary uses: a new pool per handle on one database.

use std::sync::Arc;

use async_trait::async_trait;
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_core::segment::SegmentStore;
use workerid_core::LeaseStore;
use workerid_sql::SqlStore;

/// Handles on the database at `url`, each with a pool of its own.
pub struct Database {
    pub url: String,
}

impl Database {
    async fn open(&self) -> SqlStore {
        SqlStore::builder()
            .max_connections(12)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url))
    }
}

#[async_trait]
impl SegmentFactory for Database {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.open().await)
    }
}

#[async_trait]
impl StoreFactory for Database {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.open().await)
    }
}

/// 64 clients, each with its own lease in one namespace, renew as fast as
/// they can for a second: every renewal must succeed (MySQL's REPEATABLE READ
/// deadlocked here).
#[allow(dead_code)] // not every test binary that shares this module runs it
pub async fn renewal_storm(url: &str) {
    use std::time::{Duration, Instant};
    use workerid_core::{Allocator, LeaseOptions};
    let store: Arc<dyn LeaseStore> = Arc::new(
        Database {
            url: url.to_string(),
        }
        .open()
        .await,
    );
    let namespace = format!("storm.{}", std::process::id());
    let until = Instant::now() + Duration::from_secs(1);
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let options = LeaseOptions::new()
                .worker_bits(7)
                .max_lease_time(Duration::from_secs(60));
            let allocator = Allocator::from_arc(store.clone(), &namespace, options).unwrap();
            tokio::spawn(async move {
                let mut lease = allocator.acquire().await.expect("acquire");
                let mut renewed = 0;
                while Instant::now() < until {
                    allocator
                        .renew(&mut lease)
                        .await
                        .expect("a renewal under load");
                    renewed += 1;
                }
                allocator.release(&lease).await.expect("release");
                renewed
            })
        })
        .collect();
    let mut total = 0;
    for client in clients {
        total += client.await.expect("a client failed");
    }
    assert!(total >= 64, "{total} renewals");
}
