//! The checker has teeth: a deliberately unsafe client (it issues from a
//! generator of its own, ignoring its lease deadline, its reserved window
//! and the loss of its lease) is frozen for longer than the ttl while others
//! wait for its worker ID, and the checker must report it.

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn an_unsafe_client_that_ignores_its_deadline_is_caught() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    let faults = [Fault::PauseClient];
    let mut config = support::config(Duration::from_secs(15), &faults);
    // One worker ID for the unsafe client, one for two safe clients, which
    // queue for the unsafe client's one too.
    config.worker_bits = 1;
    config.clients = 3;
    config.unsafe_clients = 1;
    config.fault_every = Duration::from_secs(4);
    // The violations are expected: the evidence a run keeps goes with a
    // directory of the test's own, removed when it ends.
    let dir = tempfile::tempdir().unwrap();
    config.dir = Some(dir.path().to_path_buf());
    let outcome = nemesis::run(&target, &config).unwrap();
    println!("{}", outcome.summary());
    support::assert_worked(&outcome, &faults);
    let report = &outcome.report;
    assert!(!report.is_safe(), "the checker missed an unsafe client");
    // Frozen past its deadline and then issuing again: always caught.
    assert!(
        report.count("after-deadline") >= 1,
        "no after-deadline violation: {report}"
    );
    // Every violation names the unsafe client (c000): the safe ones are clean.
    for v in &report.violations {
        assert!(
            v.to_string().contains("c000#"),
            "a violation without the unsafe client: {v}"
        );
    }
}
