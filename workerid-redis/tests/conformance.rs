//! The conformance suite on a real `redis-server` (started once for this test
//! binary, or the one `WORKERID_REDIS_URL` names).

use std::sync::Arc;

use async_trait::async_trait;
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_core::LeaseStore;
use workerid_redis::RedisStore;
use workerid_segment::SegmentStore;

struct SharedServer(String);

#[async_trait]
impl StoreFactory for SharedServer {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        let store = RedisStore::connect(&self.0)
            .await
            .unwrap_or_else(|e| panic!("connect to Redis at {}: {e}", self.0));
        Arc::new(store)
    }

    async fn unreachable(&self) -> Option<Arc<dyn LeaseStore>> {
        let (relay, url) = workerid_testkit::relay::Relay::in_front_of(&self.0);
        let store = RedisStore::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("connect to Redis through a relay: {e}"));
        relay.stop();
        Some(Arc::new(store))
    }

    fn share_with_children(&self) -> Option<Vec<(String, String)>> {
        let env = workerid_testkit::redis::URL_ENV;
        Some(vec![(env.to_string(), self.0.clone())])
    }
}

workerid_conformance::lease_store_tests!(SharedServer(workerid_testkit::redis::shared_url()));

#[async_trait]
impl SegmentFactory for SharedServer {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(
            RedisStore::connect(&self.0)
                .await
                .expect("connect to Redis"),
        )
    }
}

workerid_conformance::segment_store_tests!(SharedServer(workerid_testkit::redis::shared_url()));
