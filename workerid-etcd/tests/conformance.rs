//! The conformance suite (leases and segments) on a single etcd node, started
//! once for this test binary (or the one `WORKERID_ETCD_ENDPOINTS` names).

mod support;
use support::Endpoints;

workerid_conformance::lease_store_tests!(Endpoints(workerid_testkit::etcd::shared_endpoints()));
workerid_conformance::segment_store_tests!(Endpoints(workerid_testkit::etcd::shared_endpoints()));
