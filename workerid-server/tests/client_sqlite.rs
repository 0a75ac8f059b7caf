//! workerid-client against a real workerid-server on a SQLite file: the
//! lease and segment conformance suites, every call over gRPC.

mod client;

fn factory() -> client::ThroughServer {
    client::ThroughServer::new(client::sqlite_file, "WORKERID_TEST_SERVER_SQLITE")
}

workerid_conformance::lease_store_tests!(super::factory());
workerid_conformance::segment_store_tests!(super::factory());
