//! Redis without persistence. What is guaranteed:
//!
//! - under client faults (kill -9, SIGSTOP past the ttl, clock steps), every
//!   rule, exactly as on a durable store;
//! - across a restart of the server, which forgets every lease, fence and
//!   watermark: only the rules within one lease (no ID after its local
//!   deadline, none beyond its reserved window, IDs rising, its own worker
//!   ID). The rules between two holders (no overlap, no duplicate ID, IDs
//!   and fences rising across holders) can break, and only for two leases
//!   granted on either side of a restart: the checker lists those as
//!   excused and fails on any other.

mod support;

use std::time::Duration;

use workerid_faults::targets::{StoreKind, Target};

#[test]
fn volatile_redis_breaks_rules_between_holders_only_across_a_restart() {
    let target = Target::start(StoreKind::Redis).unwrap();
    assert!(target.forgetful());
    let outcome = support::survives_every_fault(&target, Duration::from_secs(25));
    println!(
        "{} violations excused by restarts that forgot the leases",
        outcome.report.excused.len()
    );
    for v in &outcome.report.excused {
        assert!(
            matches!(
                v.kind(),
                "overlap" | "duplicate-id" | "went-back" | "fence-not-rising"
            ),
            "only rules between holders are excused: {v}"
        );
    }
}
