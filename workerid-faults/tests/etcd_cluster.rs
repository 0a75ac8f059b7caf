//! A 3-member etcd cluster: client faults, and the leader or a follower
//! killed with SIGKILL and started again a few seconds later. Every rule
//! holds.

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{Etcd3, Target};

#[test]
fn etcd_cluster_keeps_every_rule_when_members_die() {
    let target = Etcd3::start();
    let mut faults = Fault::CLIENT.to_vec();
    faults.extend(target.server_faults());
    let config = support::config(Duration::from_secs(35), &faults);
    let outcome = nemesis::run(&target, &config).unwrap();
    support::assert_safe(&outcome, &faults);
}
