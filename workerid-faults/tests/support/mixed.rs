//! The mixed fleet's runs: `workerid-server`s beside go-id-alloc or Leaf
//! servers (modelled) on one table created as they create it.

use std::time::Duration;

use workerid_faults::peers::{Migration, PeerRule, PeerTable, Peers};
use workerid_faults::service::{self, ServiceConfig, ServiceOutcome};
use workerid_faults::targets::Target;

fn run(target: &Target, config: &ServiceConfig) -> ServiceOutcome {
    // Teeth runs break rules on purpose: their evidence goes with a
    // directory of the test's own.
    let dir = tempfile::tempdir().unwrap();
    let mut config = config.clone();
    config.dir = Some(dir.path().to_path_buf());
    let outcome = service::run_service(target, &config).unwrap();
    println!("{:?}: {}", config.peers, outcome.summary());
    outcome
}

/// Both kinds serve all the time under every fault `target` takes, then a
/// migration each way without faults: no segment ID twice, and both kinds
/// served plenty.
pub fn hands_out_no_id_twice(target: &Target, table: PeerTable) {
    let mut config = super::service_config(target, Duration::from_secs(15));
    config.peers = Some(Peers {
        table,
        ..Peers::go_id_alloc()
    });
    judge(&run(target, &config), 1_000);
    for migration in [Migration::TheirsThenOurs, Migration::OursThenTheirs] {
        let mut config = config.clone();
        config.seed = config.seed.wrapping_add(migration as u64 + 1);
        config.faults = Vec::new();
        config.duration = Duration::from_secs(9);
        config.peers = Some(Peers {
            table,
            migration,
            ..Peers::go_id_alloc()
        });
        judge(&run(target, &config), 500);
    }
}

fn judge(outcome: &ServiceOutcome, at_least: usize) {
    let report = &outcome.report;
    let ours = report.segment_ids - report.peer_ids;
    assert!(
        report.peer_ids >= at_least && ours >= at_least,
        "too little happened to judge (seed {}): {report}",
        outcome.seed
    );
    assert!(
        report.count("duplicate-segment-id") == 0,
        "a segment ID went out twice (seed {}):\n{report}",
        outcome.seed
    );
}

/// Peers of the other range rule (`max_id` read as the last ID handed
/// out) beside our servers: the checker must find the boundary IDs handed
/// out twice, and blame nothing else.
pub fn the_other_range_rule_is_caught(target: &Target, table: PeerTable) {
    let mut config = super::service_config(target, Duration::from_secs(6));
    config.faults = Vec::new();
    config.seed = config.seed.wrapping_add(7);
    config.peers = Some(Peers {
        table,
        rule: PeerRule::LastHandedOut,
        ..Peers::go_id_alloc()
    });
    let outcome = run(target, &config);
    let report = &outcome.report;
    assert!(
        report.count("duplicate-segment-id") >= 1,
        "the checker missed the boundary IDs handed out twice: {report}"
    );
    for v in &report.violations {
        assert_eq!(
            v.kind(),
            "duplicate-segment-id",
            "a violation the other rule does not explain: {v}"
        );
    }
}
