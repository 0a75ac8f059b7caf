//! Three `workerid-server` processes on MariaDB under the service nemesis
//! (server faults; MariaDB killed and frozen too): every rule of
//! `service_check` holds.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn the_service_on_mariadb_keeps_every_rule_under_faults() {
    let target = Target::start(StoreKind::MariaDb).unwrap();
    support::service_survives_every_fault(&target, Duration::from_secs(20));
}
