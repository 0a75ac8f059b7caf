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

    async fn unreachable(&self) -> Option<Arc<dyn LeaseStore>> {
        let (relays, through): (Vec<_>, Vec<_>) = self
            .0
            .iter()
            .map(|endpoint| workerid_testkit::relay::Relay::in_front_of(endpoint))
            .unzip();
        // A short operation timeout: each call ends in half a second.
        let store = EtcdStore::builder()
            .request_timeout(std::time::Duration::from_millis(250))
            .operation_timeout(std::time::Duration::from_millis(500))
            .connect(&through)
            .await
            .unwrap_or_else(|e| panic!("connect to etcd through relays: {e}"));
        for relay in relays {
            relay.stop();
        }
        Some(Arc::new(store))
    }

    /// The same endpoints whichever of the test kit's shared etcds (one
    /// member or three) the child's factory asks for.
    fn share_with_children(&self) -> Option<Vec<(String, String)>> {
        let endpoints = self.0.join(",");
        Some(vec![
            (
                workerid_testkit::etcd::URL_ENV.to_string(),
                endpoints.clone(),
            ),
            (
                workerid_testkit::etcd::CLUSTER_URL_ENV.to_string(),
                endpoints,
            ),
        ])
    }
}

#[async_trait]
impl SegmentFactory for Endpoints {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.store().await)
    }
}
