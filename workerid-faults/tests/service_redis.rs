//! Three `workerid-server` processes on Redis with `appendfsync always`
//! under the service nemesis (server faults; Redis killed and frozen too),
//! and each in a network namespace of its own under network faults between
//! it and Redis, in a pool with one worker ID fewer than servers (the
//! worker ID of a server cut off goes to a waiting one): every rule of
//! `service_check` holds.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn the_service_on_redis_keeps_every_rule_under_faults() {
    let target = Target::start(StoreKind::RedisDurable).unwrap();
    support::service_survives_every_fault(&target, Duration::from_secs(20));
}

#[test]
fn the_service_on_redis_keeps_every_rule_across_network_faults_in_a_tight_pool() {
    let target = Target::start(StoreKind::RedisDurable).unwrap();
    support::service_survives_network_faults_in_a_tight_pool(&target, Duration::from_secs(20));
}
