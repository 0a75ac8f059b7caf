//! What every fault test asserts about a run.
#![allow(dead_code)] // each test binary uses a part

use std::time::Duration;

pub mod disk_load;
pub mod mixed;

use workerid_faults::nemesis::{self, seed_from_env, Fault, RunConfig, RunOutcome};
use workerid_faults::service::{self, ServiceConfig, ServiceFault, ServiceOutcome};
use workerid_faults::targets::Target;
use workerid_faults::timeline::Timeline;

/// A short run's settings: the seed from `WORKERID_FAULTS_SEED` or random,
/// `duration` of faults of `faults`.
pub fn config(duration: Duration, faults: &[Fault]) -> RunConfig {
    let mut config = RunConfig::new(
        env!("CARGO_BIN_EXE_workerid-faults-client"),
        seed_from_env(),
    );
    config.duration = duration;
    config.faults = faults.to_vec();
    println!(
        "seed {} (replay: WORKERID_FAULTS_SEED={})",
        config.seed, config.seed
    );
    config
}

/// Runs `duration` of the client faults and every fault `target` can take,
/// asserts the run safe (see [`assert_safe`]), and returns it.
pub fn survives_every_fault(target: &Target, duration: Duration) -> RunOutcome {
    let mut faults = Fault::CLIENT.to_vec();
    faults.extend(target.server_faults());
    let config = config(duration, &faults);
    let outcome = nemesis::run(target, &config).unwrap();
    assert_safe(&outcome, &faults);
    outcome
}

/// The run did real work under every fault asked for, no client failed
/// for another reason, and the checker found nothing.
pub fn assert_safe(outcome: &RunOutcome, faults: &[Fault]) {
    print_run(outcome);
    assert_worked(outcome, faults);
    assert!(
        outcome.report.is_safe(),
        "safety violated (seed {}):\n{}",
        outcome.seed,
        outcome.report
    );
}

/// Prints the run's summary and its events, each at its instant.
pub fn print_run(outcome: &RunOutcome) {
    println!("{}", outcome.summary());
    for e in &outcome.events {
        println!("  {:.3} {}", e.at as f64 / 1e9, e.what);
    }
}

/// The run did real work under every fault asked for, and no client failed
/// for a reason no fault explains.
pub fn assert_worked(outcome: &RunOutcome, faults: &[Fault]) {
    assert_ran(outcome, faults);
    let report = &outcome.report;
    assert!(
        report.leases >= 4 && report.handovers >= 2 && report.ids >= 1_000,
        "too little happened to judge (seed {}): {report}",
        outcome.seed
    );
}

/// Every fault asked for was injected and drawn, and no client failed for
/// a reason no fault explains (a teeth test asks no more: the violation it
/// expects is the proof that enough happened).
pub fn assert_ran(outcome: &RunOutcome, faults: &[Fault]) {
    assert!(
        outcome.client_errors.is_empty(),
        "clients failed (seed {}): {:#?}",
        outcome.seed,
        outcome.client_errors
    );
    for fault in faults {
        assert!(
            outcome.faults.get(fault).copied().unwrap_or(0) > 0,
            "the nemesis never injected {fault:?} (seed {})",
            outcome.seed
        );
    }
    assert_drawn(&outcome.timeline, &outcome.faults, "IDs issued per second");
}

/// The run's picture names every fault injected, and its chart.
pub fn assert_drawn<F: std::fmt::Debug>(
    timeline: &Timeline,
    faults: &std::collections::BTreeMap<F, usize>,
    chart: &str,
) {
    assert_eq!(timeline.faults.len(), faults.values().sum::<usize>());
    let svg = timeline.svg().expect("the plot");
    for fault in faults.keys() {
        assert!(
            svg.contains(&format!("{fault:?}")),
            "the plot does not name {fault:?}"
        );
    }
    assert!(svg.contains(chart), "the plot has no {chart:?}");
}

/// How long a short network run lasts at least: it goes on until its
/// first round (every network fault once, each with the wait for its
/// clients to issue again, 30 to 50 s) is done.
const NETWORK_RUN: Duration = Duration::from_secs(30);

/// Runs every network fault once or more on clients in network namespaces
/// (4 clients on a pool of 8, so that none waits for a free ID), asserts
/// the run safe and every client issuing again after each heal, prints the
/// orphan grants (a grant no client received still happens now and then:
/// see docs/faults.md), and returns it.
pub fn survives_network_faults(target: &Target) -> RunOutcome {
    let faults = Fault::NETWORK.to_vec();
    let mut config = config(NETWORK_RUN, &faults);
    config.network = true;
    config.clients = 4;
    config.worker_bits = 3;
    let outcome = nemesis::run(target, &config).unwrap();
    assert_safe(&outcome, &faults);
    assert_recovered(&outcome);
    outcome
}

/// At least one heal was judged, and after every heal every client of the
/// healed lab issued again, unless the faults that followed kept it silent
/// until its end (`Recovery::stuck`).
pub fn assert_recovered(outcome: &RunOutcome) {
    assert!(
        outcome.liveness.iter().any(|r| r.judged),
        "no heal was judged (seed {})",
        outcome.seed
    );
    let stuck: Vec<_> = outcome.liveness.iter().filter(|r| r.stuck).collect();
    assert!(
        stuck.is_empty(),
        "clients that never issued again after a heal (seed {}): {stuck:?}",
        outcome.seed
    );
}

/// A short service run's settings: the seed from `WORKERID_FAULTS_SEED` or
/// random, the `workerid-server` program built if needed, `duration` of
/// every fault `target` can take.
pub fn service_config(target: &Target, duration: Duration) -> ServiceConfig {
    let began = std::time::Instant::now();
    let bin = service::server_binary().unwrap();
    println!(
        "{} (built or checked in {:?})",
        bin.display(),
        began.elapsed()
    );
    let mut config = ServiceConfig::for_target(bin, seed_from_env(), target);
    config.duration = duration;
    println!(
        "seed {} (replay: WORKERID_FAULTS_SEED={})",
        config.seed, config.seed
    );
    config
}

/// Runs the fleet on `target` for `duration` of every fault it can take
/// and asserts that it did real work and broke no rule; prints the figures.
pub fn service_survives_every_fault(target: &Target, duration: Duration) -> ServiceOutcome {
    service_survives(target, service_config(target, duration))
}

/// The fleet with each server in a network namespace of its own, for
/// `duration` of every network fault between a server and the store (its
/// HTTP clients still reach it): asserted as
/// [`service_survives_every_fault`] does, every server serving again
/// within ttl + 2 s of each heal.
pub fn service_survives_network_faults(target: &Target, duration: Duration) -> ServiceOutcome {
    let mut config = service_config(target, duration);
    config.network = true;
    config.faults = ServiceFault::NETWORK.to_vec();
    service_survives(target, config)
}

/// [`service_survives_network_faults`] in a tight pool: one worker ID fewer
/// than servers, and every network fault lasting two ttls or more, so
/// that the worker ID of a server cut off goes to a waiting server while
/// the cut one still runs. Asserts that this happened (a worker ID served
/// by two servers), with no violation: the healed server never issues on
/// the worker ID it lost, and as many servers as the pool has IDs serve
/// again within ttl + 2 s of each heal.
pub fn service_survives_network_faults_in_a_tight_pool(
    target: &Target,
    duration: Duration,
) -> ServiceOutcome {
    let mut config = service_config(target, duration);
    config.network = true;
    config.faults = ServiceFault::NETWORK.to_vec();
    config.max_worker_id = u32::try_from(config.servers).unwrap() - 2;
    config.network_faults_at_least = config.ttl * 2;
    let outcome = service_survives(target, config);
    assert!(
        outcome.report.shared_worker_ids >= 1,
        "no worker ID changed hands between servers (seed {}): {}",
        outcome.seed,
        outcome.report
    );
    outcome
}

/// Runs `config` on `target` and asserts that it did real work, that every
/// failed request failed as a fault excuses (the store unavailable, not
/// ready, no answer: [`ServiceOutcome::wrong_failures`]), and that it broke
/// no rule.
pub fn service_survives(target: &Target, config: ServiceConfig) -> ServiceOutcome {
    let outcome = service::run_service(target, &config).unwrap();
    println!("{}", outcome.summary());
    for e in &outcome.events {
        println!("  {:.3} {}", e.at as f64 / 1e9, e.what);
    }
    for fault in &config.faults {
        assert!(
            outcome.faults.get(fault).copied().unwrap_or(0) > 0,
            "the nemesis never injected {fault:?} (seed {})",
            outcome.seed
        );
    }
    let report = &outcome.report;
    assert!(
        report.segment_ids >= 1_000 && report.snowflake_ids >= 1_000 && report.judged_live >= 100,
        "too little happened to judge (seed {}): {report}",
        outcome.seed
    );
    assert!(
        report.grpc_ids >= 100 || config.grpc_clients_per_server == 0,
        "the gRPC clients were hardly served (seed {}): {report}",
        outcome.seed
    );
    assert!(
        report.is_safe(),
        "the service broke a rule (seed {}; evidence in {}):\n{report}",
        outcome.seed,
        outcome.dir.display()
    );
    assert!(
        outcome.wrong_failures().is_empty(),
        "answers no fault excuses (seed {}): {:?}",
        outcome.seed,
        outcome.wrong_failures()
    );
    let requests = outcome.timeline.requests.len();
    assert!(requests >= 1_000, "{requests} requests");
    assert_drawn(&outcome.timeline, &outcome.faults, "Request latency");
    outcome
}

/// 15 s of an unsafe client (c000) and two safe ones on a pool of two
/// worker IDs, the unsafe one frozen past its ttl now and then while the
/// others queue for its worker ID; on a ticking clock if `ticking`. The
/// violations are expected: the evidence goes with a directory of the
/// test's own, removed when it ends.
pub fn an_unsafe_client_frozen(target: &Target, ticking: bool) -> RunOutcome {
    let faults = [Fault::PauseClient];
    let mut config = config(Duration::from_secs(15), &faults);
    config.worker_bits = 1;
    config.clients = 3;
    config.unsafe_clients = 1;
    config.fault_every = Duration::from_secs(4);
    config.ticking = ticking;
    let dir = tempfile::tempdir().unwrap();
    config.dir = Some(dir.path().to_path_buf());
    let outcome = nemesis::run(target, &config).unwrap();
    println!("{}", outcome.summary());
    assert_worked(&outcome, &faults);
    outcome
}

/// 20 s of an unsafe client (c000, in lab 0) and two safe ones on a pool of
/// two worker IDs, the labs cut from the store now and then for up to three
/// ttls while the others queue for the unsafe one's worker ID. The
/// violations are expected.
pub fn an_unsafe_client_cut_off(target: &Target) -> RunOutcome {
    let faults = [Fault::PartitionClients];
    let mut config = config(Duration::from_secs(20), &faults);
    config.network = true;
    config.worker_bits = 1;
    config.clients = 3;
    config.unsafe_clients = 1;
    config.fault_every = Duration::from_secs(3);
    let dir = tempfile::tempdir().unwrap();
    config.dir = Some(dir.path().to_path_buf());
    let outcome = nemesis::run(target, &config).unwrap();
    println!("{}", outcome.summary());
    assert_worked(&outcome, &faults);
    outcome
}
