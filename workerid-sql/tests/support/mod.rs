//! The factory every SQL test binary uses: a new pool per handle on one database.

use std::sync::Arc;

use async_trait::async_trait;
use workerid_conformance::StoreFactory;
use workerid_core::LeaseStore;
use workerid_sql::SqlStore;

/// Handles on the database at `url`, each with a pool of its own.
pub struct Database {
    pub url: String,
}

#[async_trait]
impl StoreFactory for Database {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        let store = SqlStore::builder()
            .max_connections(12)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url));
        Arc::new(store)
    }
}
