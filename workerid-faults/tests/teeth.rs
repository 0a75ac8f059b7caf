//! The checker has teeth: a deliberately unsafe client (it issues from a
//! generator of its own, ignoring its lease deadline, its reserved window
//! and the loss of its lease) is frozen for longer than the ttl, or cut
//! from the store by a real partition, while others wait for its worker
//! ID, and the checker must report it.

mod support;

use workerid_faults::nemesis::RunOutcome;
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn an_unsafe_client_that_ignores_its_deadline_is_caught() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    assert_caught(&support::an_unsafe_client_frozen(&target, false));
}

#[test]
fn an_unsafe_client_cut_off_from_the_store_is_caught() {
    let target = Target::start(StoreKind::RedisDurable).unwrap();
    assert_caught(&support::an_unsafe_client_cut_off(&target));
}

/// Issuing past its deadline once thawed or healed: always caught, and
/// every violation names the unsafe client (c000), the safe ones clean.
fn assert_caught(outcome: &RunOutcome) {
    let report = &outcome.report;
    assert!(!report.is_safe(), "the checker missed an unsafe client");
    assert!(
        report.count("after-deadline") >= 1,
        "no after-deadline violation: {report}"
    );
    for v in &report.violations {
        assert!(
            v.to_string().contains("c000#"),
            "a violation without the unsafe client: {v}"
        );
    }
}
