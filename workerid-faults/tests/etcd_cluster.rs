//! A 3-member etcd cluster: client faults, the leader or a follower killed
//! with SIGKILL and started again a few seconds later, a follower or the
//! leader frozen (SIGSTOP for 1.5 to 2.5 ttl, then SIGCONT). Every rule holds.
//!
//! Freezing the leader is the fault that once gave two holders of one worker
//! ID: the old leader, back from SIGSTOP, revoked a lease its successor had
//! renewed (etcd-io/etcd#15247). The store's quarantine of expired IDs is
//! what makes it safe.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn etcd_cluster_keeps_every_rule_when_members_die() {
    let target = Target::start(StoreKind::EtcdCluster).unwrap();
    support::survives_every_fault(&target, Duration::from_secs(35));
}
