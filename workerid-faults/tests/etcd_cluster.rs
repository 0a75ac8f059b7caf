//! A 3-member etcd cluster: client faults, the leader or a follower killed
//! with SIGKILL and started again a few seconds later, a follower or the
//! leader frozen (SIGSTOP for 1.5 to 2.5 ttl, then SIGCONT). Every rule holds.
//!
//! Freezing the leader is the fault that once gave two holders of one worker
//! ID: the old leader, back from SIGSTOP, revoked a lease its successor had
//! renewed (etcd-io/etcd#15247). The store's quarantine of expired IDs is
//! what makes it safe.
//!
//! With the members apart, each in a network namespace of its own, the
//! leader is also cut from the other two: a minority of one that believes
//! it leads, beside a majority that elects another, with the clients
//! reaching every member, or (clients in network namespaces of their own)
//! only the old leader. Every rule holds, every client issues again after
//! the heal.

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn etcd_cluster_keeps_every_rule_when_members_die() {
    let target = Target::start(StoreKind::EtcdCluster).unwrap();
    support::survives_every_fault(&target, Duration::from_secs(35));
}

#[test]
fn etcd_cluster_keeps_every_rule_when_its_leader_is_cut_off() {
    let target = Target::start_etcd_cluster_apart();
    let faults = [
        Fault::IsolateEtcdLeader,
        Fault::IsolateEtcdLeaderWithClients,
        Fault::KillClient,
    ];
    let mut config = support::config(Duration::from_secs(40), &faults);
    config.network = true;
    // Room for every client's lease and those lost meanwhile: a wait for a
    // free worker ID would count against the recovery.
    config.clients = 4;
    config.worker_bits = 3;
    let outcome = nemesis::run(&target, &config).unwrap();
    support::assert_safe(&outcome, &faults);
    support::assert_recovered(&outcome);
}
