//! PostgreSQL: client faults, and the server killed with SIGKILL (every
//! process of it) and started again, recovering from its WAL; and clients
//! in network namespaces under real network faults. Every rule holds.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn postgres_keeps_every_rule_under_client_faults_and_crashes() {
    let target = Target::start(StoreKind::Postgres).unwrap();
    support::survives_every_fault(&target, Duration::from_secs(30));
}

#[test]
fn postgres_keeps_every_rule_across_network_faults() {
    let target = Target::start(StoreKind::Postgres).unwrap();
    support::survives_network_faults(&target);
}
