//! The conformance suite on a real 3-master Redis Cluster (started once for
//! this test binary, or the one `WORKERID_REDIS_CLUSTER_URLS` names).

use std::sync::Arc;

use async_trait::async_trait;
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_core::LeaseStore;
use workerid_redis::RedisStore;
use workerid_segment::SegmentStore;

struct SharedCluster(Vec<String>);

#[async_trait]
impl StoreFactory for SharedCluster {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        let store = RedisStore::connect_cluster(&self.0)
            .await
            .unwrap_or_else(|e| panic!("connect to the Redis Cluster at {:?}: {e}", self.0));
        Arc::new(store)
    }

    fn share_with_children(&self) -> Option<Vec<(String, String)>> {
        let env = workerid_testkit::redis::CLUSTER_URLS_ENV;
        Some(vec![(env.to_string(), self.0.join(","))])
    }
}

workerid_conformance::lease_store_tests!(SharedCluster(
    workerid_testkit::redis::shared_cluster_urls()
));

#[async_trait]
impl SegmentFactory for SharedCluster {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(
            RedisStore::connect_cluster(&self.0)
                .await
                .expect("connect to Redis"),
        )
    }
}

workerid_conformance::segment_store_tests!(SharedCluster(
    workerid_testkit::redis::shared_cluster_urls()
));
