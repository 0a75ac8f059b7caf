//! A drop-in for Leaf: `workerid-server`s and Leaf's segment servers
//! (modelled: its core SQL and range rule) on its `leaf_alloc` table,
//! created as its script creates it (PostgreSQL's types). No segment ID goes
//! out twice with both serving under faults, nor in a migration either
//! way; and peers of the other range rule are caught by the checker.

mod support;

use workerid_faults::peers::PeerTable;
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn leaf_and_workerid_server_share_its_table_on_postgres() {
    let target = Target::start(StoreKind::Postgres).unwrap();
    support::mixed::hands_out_no_id_twice(&target, PeerTable::Leaf);
    support::mixed::the_other_range_rule_is_caught(&target, PeerTable::Leaf);
}
