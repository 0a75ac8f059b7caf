//! workerid-client against a real workerid-server on Redis (the test kit's
//! own redis-server): the lease and segment conformance suites, every call
//! over gRPC.

mod client;

fn factory() -> client::ThroughServer {
    client::ThroughServer::new(
        workerid_testkit::redis::shared_url,
        "WORKERID_TEST_SERVER_REDIS",
    )
}

workerid_conformance::lease_store_tests!(super::factory());
workerid_conformance::segment_store_tests!(super::factory());
