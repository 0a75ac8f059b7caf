//! MariaDB (InnoDB): client faults, and the server killed with SIGKILL and
//! started again, recovering from its redo log. Every rule holds.

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{Sql, Target};

#[test]
fn mariadb_keeps_every_rule_under_client_faults_and_crashes() {
    let target = Sql::mariadb();
    let mut faults = Fault::CLIENT.to_vec();
    faults.extend(target.server_faults());
    let config = support::config(Duration::from_secs(30), &faults);
    let outcome = nemesis::run(&target, &config).unwrap();
    support::assert_safe(&outcome, &faults);
}
