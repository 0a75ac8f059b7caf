//! A 3-member etcd cluster: client faults, the leader or a follower killed
//! with SIGKILL and started again a few seconds later, a follower frozen.
//! Every rule holds.
//!
//! Not here: freezing the *leader* (`Fault::PauseEtcdLeader`), under which
//! a soak run saw two holders of one worker ID (see the README).

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{Etcd3, Target};

#[test]
fn etcd_cluster_keeps_every_rule_when_members_die() {
    let target = Etcd3::start();
    let mut faults = Fault::CLIENT.to_vec();
    faults.extend(
        target
            .server_faults()
            .into_iter()
            .filter(|f| *f != Fault::PauseEtcdLeader),
    );
    let config = support::config(Duration::from_secs(35), &faults);
    let outcome = nemesis::run(&target, &config).unwrap();
    support::assert_safe(&outcome, &faults);
}
