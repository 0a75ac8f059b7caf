//! The conformance suite (leases and segments) on a 3-member etcd cluster,
//! started once for this test binary (or the one
//! `WORKERID_ETCD_CLUSTER_ENDPOINTS` names).

mod support;
use support::Endpoints;

workerid_conformance::lease_store_tests!(Endpoints(
    workerid_testkit::etcd::shared_cluster_endpoints()
));
workerid_conformance::segment_store_tests!(Endpoints(
    workerid_testkit::etcd::shared_cluster_endpoints()
));
