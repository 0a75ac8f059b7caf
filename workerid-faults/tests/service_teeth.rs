//! The service checker has teeth: two servers forced onto one worker ID
//! (each leases it in a lease namespace of its own, from a pool of one, so
//! both issue snowflake IDs as worker ID 0 at once) must be caught, and
//! nothing else may be blamed: their segment IDs, from one store, stay
//! unique.

mod support;

use std::time::Duration;

use workerid_faults::service;
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn two_servers_on_one_worker_id_are_caught() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    let mut config = support::service_config(&target, Duration::from_secs(8));
    config.servers = 2;
    config.unsafe_shared_worker_id = true;
    // No faults: the first server keeps worker ID 0 live in the namespace
    // the poller lists, so only the overlap itself can be blamed.
    config.faults = Vec::new();
    // The violations are expected: the evidence a run keeps goes with a
    // directory of the test's own, removed when it ends.
    let dir = tempfile::tempdir().unwrap();
    config.dir = Some(dir.path().to_path_buf());
    let outcome = service::run_service(&target, &config).unwrap();
    println!("{}", outcome.summary());
    let report = &outcome.report;
    assert!(
        report.snowflake_ids >= 1_000 && report.segment_ids >= 1_000,
        "too little happened to judge: {report}"
    );
    assert!(
        !report.is_safe(),
        "the checker missed two servers on one worker ID"
    );
    let caught = report.count("duplicate-snowflake-id") + report.count("went-back");
    assert!(caught >= 1, "no duplicate or went-back violation: {report}");
    for v in &report.violations {
        assert!(
            matches!(v.kind(), "duplicate-snowflake-id" | "went-back"),
            "a violation the unsafe setup does not explain: {v}"
        );
    }
}
