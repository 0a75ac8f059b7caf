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
