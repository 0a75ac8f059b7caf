//! workerid-client under the service nemesis: besides the servers' own
//! snowflake IDs, a library worker per server leases through that server's
//! gRPC port (workerid-client's `ServerStore`, in the servers' namespace and
//! pool) and makes IDs in its own process, while the servers are killed,
//! frozen and stopped under it. Every rule of `service_check` holds over
//! all of them together: no ID twice, each worker ID's IDs rising across
//! servers and client workers, each ID on a live lease.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn library_workers_through_the_client_crate_keep_every_rule() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    let mut config = support::service_config(&target, Duration::from_secs(20));
    config.client_crate_workers_per_server = 1;
    // Room for the client workers' leases beside the servers', and for the
    // ones a fault leaves to expire.
    config.max_worker_id = 15;
    let outcome = support::service_survives(&target, config);
    let report = &outcome.report;
    assert!(report.client_crate_ids >= 1_000, "{report}");
}
