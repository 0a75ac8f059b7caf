//! Clients whose generators read a `TickingClock` over their fault clock
//! (its thread stores that clock's time every millisecond; the nemesis
//! steps, freezes and skews the clock under it), on a SQLite file under every
//! client fault: a frozen and thawed client issues on the time stored before
//! the freeze until its ticker runs again, so the checker holds them to the
//! rule that clock keeps, fail closed by timestamp: no ID past the window
//! reserved in the store, never two holders' IDs out of order or alike. Its
//! teeth: an unsafe client on a ticking clock, whose generator ignores its
//! window, is caught.

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn clients_on_a_ticking_clock_keep_the_timestamp_rule() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    let faults = Fault::CLIENT;
    let mut config = support::config(Duration::from_secs(20), &faults);
    config.ticking = true;
    let outcome = nemesis::run(&target, &config).unwrap();
    support::assert_safe(&outcome, &faults);
}

#[test]
fn an_unsafe_client_on_a_ticking_clock_is_caught() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    let outcome = support::an_unsafe_client_frozen(&target, true);
    let report = &outcome.report;
    assert!(
        !report.is_safe(),
        "the checker missed an unsafe ticking client"
    );
    assert_eq!(
        report.count("after-deadline"),
        0,
        "a ticking client is not judged by real time: {report}"
    );
    for v in &report.violations {
        assert!(
            v.to_string().contains("c000#"),
            "a violation without the unsafe client: {v}"
        );
    }
}
