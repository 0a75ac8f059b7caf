//! Three `workerid-server` processes on PostgreSQL under the service
//! nemesis (server faults; PostgreSQL killed and frozen too), and each in a
//! network namespace of its own under network faults between it and
//! PostgreSQL: every rule of `service_check` holds.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn the_service_on_postgres_keeps_every_rule_under_faults() {
    let target = Target::start(StoreKind::Postgres).unwrap();
    support::service_survives_every_fault(&target, Duration::from_secs(20));
}

#[test]
fn the_service_on_postgres_keeps_every_rule_across_network_faults() {
    let target = Target::start(StoreKind::Postgres).unwrap();
    support::service_survives_network_faults(&target, Duration::from_secs(20));
}
