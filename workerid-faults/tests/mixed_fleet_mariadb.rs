//! A drop-in for go-id-alloc: `workerid-server`s and go-id-alloc's servers
//! (modelled: its core SQL and range rule) on its `segments` table, created
//! exactly as its README creates it, on MariaDB in its default strict mode.
//! No segment ID goes out twice with both serving under faults (our
//! servers killed, frozen, stopped with their tails given back; MariaDB
//! restarted and frozen), nor in a migration either way.

mod support;

use workerid_faults::peers::PeerTable;
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn go_id_alloc_and_workerid_server_share_its_table_on_mariadb() {
    let target = Target::start(StoreKind::MariaDb).unwrap();
    support::mixed::hands_out_no_id_twice(&target, PeerTable::GoIdAlloc);
}
