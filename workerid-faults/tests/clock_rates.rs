//! Clients whose clocks run at the wrong rate (monotonic and wall time, as
//! a machine with a bad oscillator and no NTP). Within
//! the drift allowance (1 %, `LeaseOptions::drift_allowance_ppm`) every
//! rule holds under every client fault (SQLite) and for slow holders cut
//! from Redis by real partitions while others queue for their worker IDs;
//! in that same run, clocks far slower than it allows are caught issuing
//! after the store let their lease go: the allowance is what protects the
//! deadline.

mod support;

use std::time::Duration;

use workerid_faults::nemesis::{self, Fault};
use workerid_faults::targets::{StoreKind, Target};

#[test]
fn clocks_half_a_percent_off_keep_every_rule() {
    let target = Target::start(StoreKind::Sqlite).unwrap();
    let faults = Fault::CLIENT;
    let mut config = support::config(Duration::from_secs(20), &faults);
    // Fast, slow, and one that keeps time, in turn.
    config.clock_rates_ppm = vec![5_000, -5_000, 0];
    let outcome = nemesis::run(&target, &config).unwrap();
    support::assert_safe(&outcome, &faults);
}

/// 24 s of holders with slow clocks cut from Redis by real partitions of
/// at least two ttls, while clients that keep time queue for their worker
/// IDs. The first two clients (they take both worker IDs at the start and
/// keep them, one in each network lab) have clocks `ppm` slow; the others
/// keep time. A slow holder cut off goes on issuing until its own deadline,
/// which by the store's clock falls `ttl x (1 - allowance) / (1 - slowness)`
/// after its last renewal: before the store lets the lease go within the
/// allowance, after it beyond.
fn slow_holders_cut_off(ppm: i64) -> workerid_faults::nemesis::RunOutcome {
    let target = Target::start(StoreKind::RedisDurable).unwrap();
    let faults = [Fault::PartitionClients];
    // Long enough that the second cut, which starts about ten seconds in,
    // ends with time left for its hand-overs.
    let mut config = support::config(Duration::from_secs(24), &faults);
    config.clock_rates_ppm = vec![ppm, ppm, 0, 0];
    config.network = true;
    config.network_faults_at_least = Duration::from_secs(4);
    config.worker_bits = 1;
    config.clients = 4;
    config.fault_every = Duration::from_secs(3);
    let dir = tempfile::tempdir().unwrap();
    config.dir = Some(dir.path().to_path_buf());
    let outcome = nemesis::run(&target, &config).unwrap();
    support::print_run(&outcome);
    support::assert_ran(&outcome, &faults);
    outcome
}

#[test]
fn slow_holders_within_the_allowance_cut_off_keep_every_rule() {
    let outcome = slow_holders_cut_off(-5_000);
    support::assert_worked(&outcome, &[Fault::PartitionClients]);
    assert!(outcome.report.is_safe(), "{}", outcome.report);
}

/// At a fifth of the speed the holder's deadline falls four ttls after the
/// store let its lease go, and a client that keeps time takes the ID
/// meanwhile. (The slow holder's wall clock is behind by then too, so the
/// watermark the new holder waits for does not hold it back; a slow client
/// that lost its lease cannot join again: its clock is too far behind the
/// watermarks the others left.)
#[test]
fn a_clock_far_too_slow_is_caught() {
    let outcome = slow_holders_cut_off(-800_000);
    let report = &outcome.report;
    assert!(
        !report.is_safe(),
        "a clock at a fifth of the speed went unnoticed"
    );
    assert!(report.count("overlap") >= 1, "{report}");
}
