//! Three `workerid-server` processes on one SQLite file (WAL) under the
//! service nemesis (server faults only: the file has no server to kill):
//! every rule of `service_check` holds.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn the_service_on_sqlite_keeps_every_rule_under_faults() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    support::service_survives_every_fault(&target, Duration::from_secs(20));
}
