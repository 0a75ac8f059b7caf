//! The fault-injection run, for soak testing: starts a store (through the
//! test harness), runs clients against it under a seeded nemesis, checks
//! their histories, and exits 1 on any violation (with `--network`, a
//! client that issued nothing within ttl + 2 s of a heal is one).
//!
//! ```sh
//! cargo run -p workerid-faults --release --bin workerid-faults -- \
//!     --store etcd-cluster --duration-secs 600 --clients 6 --seed 42
//! ```
//!
//! With `--network`, clients live in network namespaces and the faults
//! include real network ones (see `workerid_faults::network`). In a pool
//! smaller than the clients (the default: 5 on 4 IDs) a client that lost
//! its lease may wait for another to let an ID go, and its recovery is
//! judged from the last answer that every ID was held; a pool with an ID
//! for every client judges every recovery from its heal:
//!
//! ```sh
//! cargo run -p workerid-faults --release --bin workerid-faults -- \
//!     --store redis-durable --network --clients 4 --worker-bits 3 \
//!     --duration-secs 600 --seed 42
//! ```
//!
//! With `--service`, the same for the HTTP service: `--servers` real
//! `workerid-server` processes on the store, under server and store
//! faults (see `workerid_faults::service`):
//!
//! ```sh
//! cargo run -p workerid-faults --release --bin workerid-faults -- \
//!     --service --store postgres --duration-secs 600 --seed 42
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use workerid_faults::nemesis::{self, seed_from_env, Fault, RunConfig};
use workerid_faults::peers::{Migration, PeerRule, PeerTable, Peers};
use workerid_faults::service::{self, ServiceConfig, ServiceFault};
use workerid_faults::targets::{StoreKind, Target};
use workerid_faults::timeline::Timeline;
use workerid_faults::FaultsError;
use workerid_testkit::progress::Progress;

#[derive(Parser, Debug)]
#[command(about = "Fault-injection safety run of workerid on one store")]
struct Args {
    /// Which store to start and attack: memory, sqlite, redis (no
    /// persistence: a restart forgets every lease), redis-durable, etcd,
    /// etcd-cluster, postgres, mariadb.
    #[arg(long, value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<StoreKind>()))]
    store: StoreKind,
    /// How long faults go on, in seconds, at least: a run goes on until
    /// every fault was injected once.
    #[arg(long, default_value_t = 60)]
    duration_secs: u64,
    /// Clients running at any time.
    #[arg(long, default_value_t = 5)]
    clients: usize,
    /// Replays a run (default: from WORKERID_FAULTS_SEED, else random).
    #[arg(long)]
    seed: Option<u64>,
    /// The lease ttl in milliseconds (etcd: whole seconds, at least 2000).
    #[arg(long, default_value_t = 2000)]
    ttl_ms: u64,
    /// The pool is 0..2^worker_bits.
    #[arg(long, default_value_t = 2)]
    worker_bits: u8,
    /// The mean time between faults, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    fault_every_ms: u64,
    /// Run this many deliberately unsafe clients (the checker must fail).
    #[arg(long, default_value_t = 0)]
    unsafe_clients: usize,
    /// The clients' clock rates in parts per million off (negative: slow),
    /// comma-separated, given to the clients in turn (e.g. 5000,-5000,0).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    clock_rates_ppm: Vec<i64>,
    /// The shortest a network fault lasts, in milliseconds (default: from
    /// half a ttl).
    #[arg(long, default_value_t = 0)]
    network_faults_at_least_ms: u64,
    /// Only faults on clients (no store restarts).
    #[arg(long)]
    client_faults_only: bool,

    /// The store's data on a small disk of its own (a size-limited tmpfs;
    /// needs root), and the fault that fills it up (fill-store-disk) among
    /// the store's faults
    #[arg(long)]
    small_disk: bool,

    /// The store's data on a disk of its own that can fail (ext4 on a loop
    /// device; needs root), and the fault that makes it fail (EIO), then
    /// mounts it again and restarts the store (fail-store-disk) among the
    /// store's faults; not for SQLite, whose clients open its file
    #[arg(long, conflicts_with = "small_disk")]
    failing_disk: bool,

    /// The store's data on a disk of its own whose every fsync can fail for
    /// a while under a file system that stays writable (a FUSE file system;
    /// needs root), and the fault that makes it fail, then stops the store,
    /// drops the lost pages and starts it again (fail-store-fsync) among
    /// the store's faults
    #[arg(long, conflicts_with_all = ["small_disk", "failing_disk"])]
    fsync_failing_disk: bool,

    /// With --store etcd-cluster: each member in a network namespace of its
    /// own (needs root), and the fault that cuts the leader from the others
    /// (isolate-etcd-leader) among the store's faults; with --network,
    /// isolate-etcd-leader-with-clients may be asked for too
    #[arg(long)]
    members_apart: bool,
    /// Clients (with --service: servers) in network namespaces of their
    /// own, and the network faults (partitions, one-way loss, lossy,
    /// half-open and stalled links) among the faults (needs root).
    #[arg(long)]
    network: bool,
    /// Only these faults (comma-separated), instead of every fault the
    /// store can take.
    #[arg(long, value_enum, value_delimiter = ',')]
    faults: Vec<Fault>,
    /// Attack the HTTP service (`workerid-server` processes) instead of
    /// library clients.
    #[arg(long)]
    service: bool,
    /// With --service: how many servers.
    #[arg(long, default_value_t = 3)]
    servers: usize,
    /// With --service: the pool is 0..=max_worker_id (default 7; on etcd,
    /// 4 IDs per server).
    #[arg(long)]
    max_worker_id: Option<u32>,
    /// With --service: only these faults (comma-separated), instead of
    /// every fault the store can take.
    #[arg(long, value_enum, value_delimiter = ',')]
    service_faults: Vec<ServiceFault>,
    /// With --service on PostgreSQL or MariaDB: this many go-id-alloc or
    /// Leaf servers (modelled) share the segment table, created as they
    /// create it (0: none).
    #[arg(long, default_value_t = 0)]
    peers: usize,
    /// With --peers: whose table.
    #[arg(long, value_enum, default_value_t = PeerTable::GoIdAlloc)]
    peer_table: PeerTable,
    /// With --peers: their range rule (`last-handed-out`: the checker must
    /// fail).
    #[arg(long, value_enum, default_value_t = PeerRule::Theirs)]
    peer_rule: PeerRule,
    /// With --peers: who serves when.
    #[arg(long, value_enum, default_value_t = Migration::Alongside)]
    migration: Migration,
    /// Keep histories and logs here (default: a temporary directory, kept
    /// only when a violation is found).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also draw the run as an SVG into this file: IDs issued per second
    /// (with --service: request latency and rate) over time, the fault
    /// windows shaded.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// Writes the run's picture to `path`, if one is asked for; false if it
/// could not be written.
fn plot(path: Option<&PathBuf>, timeline: &Timeline) -> bool {
    let Some(path) = path else {
        return true;
    };
    let written = timeline.svg().and_then(|svg| {
        std::fs::write(path, svg).map_err(|source| FaultsError::Io {
            path: path.clone(),
            source,
        })
    });
    match written {
        Ok(()) => {
            println!("(the plot: {})", path.display());
            true
        }
        Err(e) => {
            eprintln!("{e}");
            false
        }
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(seed_from_env);
    println!("seed {seed} (replay with --seed {seed})");
    if args.service {
        std::process::exit(run_service(&args, seed));
    }
    let client_bin = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("workerid-faults-client"),
        Err(e) => {
            eprintln!("cannot find the client program: {e}");
            std::process::exit(2);
        }
    };
    let mut config = RunConfig::new(client_bin, seed);
    config.duration = Duration::from_secs(args.duration_secs);
    config.clients = args.clients;
    config.unsafe_clients = args.unsafe_clients;
    config.clock_rates_ppm = args.clock_rates_ppm.clone();
    config.network_faults_at_least = Duration::from_millis(args.network_faults_at_least_ms);
    config.ttl = Duration::from_millis(args.ttl_ms);
    config.worker_bits = args.worker_bits;
    config.fault_every = Duration::from_millis(args.fault_every_ms);
    config.dir = args.dir.clone();
    let progress = Progress::timed(config.duration, "fault run");
    progress.message(format!("{:?}", args.store));
    let outcome = if args.store == StoreKind::Memory {
        config.faults = vec![Fault::KillClient, Fault::StepClock];
        workerid_faults::inprocess::run(&config)
    } else {
        match start_target(&args) {
            Ok(target) => {
                if !args.client_faults_only {
                    config.faults.extend(target.server_faults());
                }
                if args.network {
                    config.network = true;
                    config.faults.extend(Fault::NETWORK);
                }
                if !args.faults.is_empty() {
                    config.faults = args.faults.clone();
                }
                nemesis::run(&target, &config)
            }
            Err(e) => Err(e),
        }
    };
    drop(progress);
    match outcome {
        Ok(outcome) => {
            println!("{}", outcome.summary());
            for e in &outcome.client_errors {
                println!("client error: {e}");
            }
            let slow = outcome.slow_recoveries();
            for r in &slow {
                println!(
                    "slow recovery: {} after {:?} in lab {}: {}",
                    r.client,
                    r.heal.fault,
                    r.heal.lab,
                    r.after
                        .map_or("issued nothing".to_string(), |after| format!(
                            "issued {:.2} s after the heal",
                            after.as_secs_f64()
                        ))
                );
            }
            let drawn = plot(args.plot.as_ref(), &outcome.timeline);
            if !outcome.report.is_safe()
                || !outcome.client_errors.is_empty()
                || !slow.is_empty()
                || !drawn
            {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("the run failed: {e}");
            std::process::exit(2);
        }
    }
}

/// The store the run attacks: on a small disk of its own with
/// `--small-disk`, its members apart with `--members-apart`.
fn start_target(args: &Args) -> workerid_faults::Result<Target> {
    if args.members_apart {
        if args.store != StoreKind::EtcdCluster {
            return Err(workerid_faults::FaultsError::Config(
                "--members-apart is for --store etcd-cluster".into(),
            ));
        }
        return Ok(Target::start_etcd_cluster_apart());
    }
    if args.small_disk {
        Target::start_on_small_disk(args.store)
    } else if args.failing_disk {
        Target::start_on_failing_disk(args.store)
    } else if args.fsync_failing_disk {
        Target::start_on_fsync_failing_disk(args.store)
    } else {
        Target::start(args.store)
    }
}

/// The service run: returns the exit code (0 safe, 1 a violation, 2 the
/// run could not be made).
fn run_service(args: &Args, seed: u64) -> i32 {
    if args.store == StoreKind::Memory {
        eprintln!("the service needs a store its servers can share, not memory");
        return 2;
    }
    let bin = match service::server_binary() {
        Ok(bin) => bin,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let target = match start_target(args) {
        Ok(target) => target,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let mut config = ServiceConfig::new(bin, seed);
    config.servers = args.servers;
    config.fit_pool(&target);
    if let Some(max) = args.max_worker_id {
        config.max_worker_id = max;
    }
    config.duration = Duration::from_secs(args.duration_secs);
    config.ttl = Duration::from_secs(args.ttl_ms.div_ceil(1000).max(1));
    config.recovery_bound = workerid_faults::recovery::bound(config.ttl);
    config.fault_every = Duration::from_millis(args.fault_every_ms);
    config.dir = args.dir.clone();
    if args.peers > 0 {
        config.peers = Some(Peers {
            count: args.peers,
            table: args.peer_table,
            rule: args.peer_rule,
            migration: args.migration,
        });
    }
    config.network = args.network;
    config.faults = if args.service_faults.is_empty() {
        let mut faults = ServiceFault::all_for(&target);
        if args.network {
            faults.extend(ServiceFault::NETWORK);
        }
        faults
    } else {
        args.service_faults.clone()
    };
    let progress = Progress::timed(config.duration, "service fault run");
    let outcome = service::run_service(&target, &config);
    drop(progress);
    match outcome {
        Ok(outcome) => {
            println!("{}", outcome.summary());
            let applied: usize = outcome.faults.values().sum();
            let report = &outcome.report;
            println!(
                "IDs checked: {} ({} segment, {} snowflake); faults applied: {applied}",
                report.segment_ids + report.snowflake_ids,
                report.segment_ids,
                report.snowflake_ids
            );
            let drawn = plot(args.plot.as_ref(), &outcome.timeline);
            i32::from(!report.is_safe() || !drawn)
        }
        Err(e) => {
            eprintln!("the run failed: {e}");
            2
        }
    }
}
