//! Redis with `appendonly yes` + `appendfsync always`: client faults, and
//! the server killed with SIGKILL and started again on its append-only
//! file; and clients in network namespaces under real network faults.
//! Every rule holds.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn durable_redis_keeps_every_rule_under_client_faults_and_crashes() {
    let target = Target::start(StoreKind::RedisDurable).unwrap();
    support::survives_every_fault(&target, Duration::from_secs(30));
}

#[test]
fn redis_keeps_every_rule_across_network_faults() {
    let target = Target::start(StoreKind::RedisDurable).unwrap();
    support::survives_network_faults(&target);
}
