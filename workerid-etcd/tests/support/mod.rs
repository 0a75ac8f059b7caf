//! What the etcd test binaries share: a factory over a list of endpoints.

#![allow(dead_code)] // each test binary uses its own part

use std::sync::Arc;

use async_trait::async_trait;
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_core::LeaseStore;
use workerid_etcd::EtcdStore;
use workerid_segment::SegmentStore;

/// Stores on the etcd members at these endpoints.
pub struct Endpoints(pub Vec<String>);

impl Endpoints {
    pub async fn store(&self) -> EtcdStore {
        EtcdStore::connect(&self.0)
            .await
            .unwrap_or_else(|e| panic!("connect to etcd at {:?}: {e}", self.0))
    }
}

#[async_trait]
impl StoreFactory for Endpoints {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.store().await)
    }
}

#[async_trait]
impl SegmentFactory for Endpoints {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.store().await)
    }
}
