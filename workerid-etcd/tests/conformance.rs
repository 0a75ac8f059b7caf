//! The conformance suite (leases and segments) on a single etcd node, started
//! once for this test binary (or the one `WORKERID_ETCD_ENDPOINTS` names).

use std::sync::Arc;

use async_trait::async_trait;
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_core::segment::SegmentStore;
use workerid_core::LeaseStore;
use workerid_etcd::EtcdStore;

struct SharedNode(Vec<String>);

impl SharedNode {
    async fn store(&self) -> EtcdStore {
        EtcdStore::connect(&self.0)
            .await
            .unwrap_or_else(|e| panic!("connect to etcd at {:?}: {e}", self.0))
    }
}

#[async_trait]
impl StoreFactory for SharedNode {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.store().await)
    }
}

#[async_trait]
impl SegmentFactory for SharedNode {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.store().await)
    }
}

workerid_conformance::lease_store_tests!(SharedNode(workerid_servers::etcd::shared_endpoints()));
workerid_conformance::segment_store_tests!(SharedNode(workerid_servers::etcd::shared_endpoints()));
