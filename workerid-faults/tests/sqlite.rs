//! Client processes sharing a SQLite file (WAL), under client faults: kill
//! -9, SIGSTOP for longer than the ttl, wall clock steps. There is no server
//! to restart.

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn sqlite_keeps_every_rule_under_client_faults() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    let faults = Fault::CLIENT;
    let config = support::config(Duration::from_secs(25), &faults);
    let outcome = nemesis::run(&target, &config).unwrap();
    support::assert_safe(&outcome, &faults);
}
