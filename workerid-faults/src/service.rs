//! The service under the nemesis: two or three real `workerid-server`
//! processes share one store while HTTP clients ask every one of them for
//! segment IDs (go-id-alloc's `/alloc` and Leaf's `/api/segment/get/{tag}`)
//! and snowflake IDs (Leaf's `/api/snowflake/get/{key}`), a poller lists the
//! lease namespace, and a seeded nemesis kills (SIGKILL), freezes (SIGSTOP
//! past the ttl), stops (SIGTERM, mid-load) and starts the servers again,
//! and kills or freezes the store. Then [`check_service`] judges it all.
//!
//! Every ID a client receives is pushed to the run's history before the
//! client counts it as acknowledged; the history lives in this process, so
//! nothing a client saw can be missing from it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use workerid::snowflake::Layout;
use workerid::LeaseOptions;

use crate::clock::mono_ns;
use crate::nemesis::{nanos, run_dir, Fault};
use crate::peers::{create_table, serve_as_peer, Migration, PeerTable, Peers};
use crate::service_check::{check_service, Endpoint, Received, ServiceCheckOptions};
use crate::service_clients::{
    poll_leases, serve_client_crate, serve_grpc_requests, serve_requests, Shared,
};
use crate::service_fleet::launch;
pub use crate::service_fleet::server_binary;
use crate::targets::Target;
use crate::timeline::{Request, Timeline};
use crate::{FaultsError, Result};

mod nemesis;
mod outcome;
use nemesis::Nemesis;
pub use outcome::ServiceOutcome;

/// A fault the service nemesis can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum ServiceFault {
    /// SIGKILL a server (it gives nothing back), start it again 0.2 to
    /// 1.5 s later.
    KillServer,
    /// SIGSTOP a server for 1.5 to 2.5 ttls, then SIGCONT.
    PauseServer,
    /// SIGTERM a server under load (it gives its segment tails back and
    /// releases its lease while the others reserve), then start it again.
    TermServer,
    /// SIGKILL the store and start it again on the same data.
    RestartStore,
    /// SIGSTOP the store for 1.5 to 2.5 ttls, then SIGCONT.
    PauseStore,
    /// A network run: cut one server from the store, both ways, for 0.5
    /// to 3 ttls, while its HTTP clients still reach it.
    CutServerFromStore,
    /// A network run: the store's replies to one server lost for 0.5 to 3
    /// ttls (its requests are applied).
    DropStoreReplies,
    /// A network run: 5 to 30 % of one server's packets to and from the
    /// store lost, for 1 to 3 ttls.
    LossyStoreLink,
    /// A network run: one server's connections to the store half-open
    /// (forgotten at the store's end during a short cut).
    HalfOpenStoreLink,
    /// A network run: one server's link to the store slow for 1 to 3 ttls
    /// (each round trip a third of the ttl to 1.25 ttls longer).
    SlowStoreLink,
    /// A network run: the store cut from every server at once, both ways,
    /// for 0.5 to 3 ttls, while their HTTP clients still reach them.
    PartitionStore,
    /// Fill the store's disk for 1 to 3 ttls, then free it (a store started
    /// on a small disk: [`Target::start_on_small_disk`]).
    FillStoreDisk,
    /// Fail the store's disk, then mount it again and restart the store (a
    /// store on a failing disk: [`Target::start_on_failing_disk`]).
    FailStoreDisk,
    /// Fail every `fsync` on the store's disk for a while, then stop the
    /// store, drop the lost pages and start it again, on the same mount (a
    /// store on a disk whose `fsync` fails:
    /// [`Target::start_on_fsync_failing_disk`]).
    FailStoreFsync,
}

impl ServiceFault {
    /// The faults on servers, which every store can take.
    pub const SERVER: [ServiceFault; 3] = [
        ServiceFault::KillServer,
        ServiceFault::PauseServer,
        ServiceFault::TermServer,
    ];

    /// The faults on the network between one server and the store (a
    /// network run, [`ServiceConfig::network`]).
    pub const NETWORK: [ServiceFault; 6] = [
        ServiceFault::CutServerFromStore,
        ServiceFault::DropStoreReplies,
        ServiceFault::LossyStoreLink,
        ServiceFault::HalfOpenStoreLink,
        ServiceFault::SlowStoreLink,
        ServiceFault::PartitionStore,
    ];

    /// The network fault of the lease suite this one applies.
    fn network(self) -> Option<Fault> {
        match self {
            ServiceFault::CutServerFromStore => Some(Fault::PartitionClients),
            ServiceFault::DropStoreReplies => Some(Fault::DropReplies),
            ServiceFault::LossyStoreLink => Some(Fault::LossyLink),
            ServiceFault::HalfOpenStoreLink => Some(Fault::HalfOpen),
            ServiceFault::SlowStoreLink => Some(Fault::SlowLink),
            ServiceFault::PartitionStore => Some(Fault::PartitionStore),
            _ => None,
        }
    }

    /// Every fault `target` can take.
    pub fn all_for(target: &Target) -> Vec<ServiceFault> {
        let mut faults = ServiceFault::SERVER.to_vec();
        let store = target.server_faults();
        if store.contains(&Fault::RestartStore) {
            faults.push(ServiceFault::RestartStore);
        }
        if store.contains(&Fault::PauseStore) {
            faults.push(ServiceFault::PauseStore);
        }
        for (disk, fault) in [
            (Fault::FillStoreDisk, ServiceFault::FillStoreDisk),
            (Fault::FailStoreDisk, ServiceFault::FailStoreDisk),
            (Fault::FailStoreFsync, ServiceFault::FailStoreFsync),
        ] {
            if store.contains(&disk) {
                faults.push(fault);
            }
        }
        faults
    }
}

/// How a service run goes.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The `workerid-server` program ([`server_binary`]).
    pub server_bin: PathBuf,
    /// How many servers.
    pub servers: usize,
    /// HTTP client threads per server.
    pub clients_per_server: usize,
    /// gRPC client threads per server (each server also serves gRPC).
    pub grpc_clients_per_server: usize,
    /// Library workers per server whose leases go through workerid-client
    /// to that server, in the servers' namespace and pool (make room in
    /// `max_worker_id`); 0 by default.
    pub client_crate_workers_per_server: usize,
    /// How long faults go on (longer if the first round, every fault once,
    /// takes longer).
    pub duration: Duration,
    /// Seeds every choice of the nemesis.
    pub seed: u64,
    /// The snowflake lease ttl (whole seconds: the server's setting).
    pub ttl: Duration,
    /// The pool is `0..=max_worker_id`: small, so that worker IDs change
    /// hands between servers, yet with room for every server's lease plus
    /// the ones lost to a fault, which stay taken until they expire (see
    /// [`ServiceConfig::for_target`]), or a rejoin waits for a free ID.
    /// A pool smaller than the servers (a tight pool) keeps servers
    /// waiting: the worker ID of a server cut off from the store goes to
    /// one of them once its lease expires, and liveness asks only that as
    /// many servers serve as the pool has IDs ([`ServiceConfig::serving`]).
    pub max_worker_id: u32,
    /// The segment tags, each with this step (small: segments run out and
    /// are reserved often).
    pub tags: Vec<String>,
    /// The segment step.
    pub step: u64,
    /// The faults to inject: each once first, in a seeded order, then at
    /// random.
    pub faults: Vec<ServiceFault>,
    /// The mean pause between a fault's recovery and the next fault.
    pub fault_every: Duration,
    /// How soon after a fault every server must serve snowflake IDs again.
    pub recovery_bound: Duration,
    /// A client's pause between two requests.
    pub request_pause: Duration,
    /// The checker's teeth: every server leases its worker ID in a
    /// namespace of its own with a pool of one, so that all of them issue
    /// snowflake IDs as worker ID 0 at once.
    pub unsafe_shared_worker_id: bool,
    /// go-id-alloc or Leaf servers (modelled) on the same segment table,
    /// which is then created as they create it (SQL stores only).
    pub peers: Option<Peers>,
    /// Each server runs in a network namespace of its own, reaching the
    /// store over a link that [`ServiceFault::NETWORK`] faults break while
    /// its HTTP clients still reach it (needs root; see
    /// [`network`](crate::network)).
    pub network: bool,
    /// The shortest a network fault lasts (zero: 0.5 to 3 ttls as drawn);
    /// longer than a ttl, a cut costs its server the lease.
    pub network_faults_at_least: Duration,
    /// Where the history and logs go (kept); a temporary directory if `None`.
    pub dir: Option<PathBuf>,
}

impl ServiceConfig {
    /// Defaults for a short run: 3 servers, ttl 2 s, a pool of 8, tags `a`,
    /// `b` and `c` of step 50, every server fault, 20 s.
    pub fn new(server_bin: impl Into<PathBuf>, seed: u64) -> ServiceConfig {
        let ttl = Duration::from_secs(2);
        ServiceConfig {
            server_bin: server_bin.into(),
            servers: 3,
            clients_per_server: 2,
            grpc_clients_per_server: 1,
            client_crate_workers_per_server: 0,
            duration: Duration::from_secs(20),
            seed,
            ttl,
            max_worker_id: 7,
            tags: vec!["a".into(), "b".into(), "c".into()],
            step: 50,
            faults: ServiceFault::SERVER.to_vec(),
            fault_every: Duration::from_secs(1),
            recovery_bound: crate::recovery::bound(ttl),
            request_pause: Duration::from_millis(2),
            unsafe_shared_worker_id: false,
            peers: None,
            network: false,
            network_faults_at_least: Duration::ZERO,
            dir: None,
        }
    }

    /// [`ServiceConfig::new`] with every fault `target` can take and a pool
    /// that fits it ([`ServiceConfig::fit_pool`]).
    pub fn for_target(server_bin: impl Into<PathBuf>, seed: u64, target: &Target) -> ServiceConfig {
        let mut config = ServiceConfig::new(server_bin, seed);
        config.faults = ServiceFault::all_for(target);
        config.fit_pool(target);
        config
    }

    /// Sets the pool for this many servers on `target`: 8 IDs, or on etcd 4
    /// per server. There an ID lost to a fault is free again only some 2
    /// ttls + 2 s later (its expiry lag and quarantine), so after a store
    /// fault that costs every server its lease each needs a second ID free
    /// at once, and a server fault that follows a third.
    pub fn fit_pool(&mut self, target: &Target) {
        self.max_worker_id = if target.name().starts_with("etcd") {
            u32::try_from(self.servers * 4)
                .unwrap_or(u32::MAX)
                .saturating_sub(1)
        } else {
            7
        };
    }

    /// How many servers can hold a worker ID at once, and must serve
    /// snowflake IDs after every fault: all of them, or in a tight pool as
    /// many as it has IDs.
    pub fn serving(&self) -> usize {
        usize::try_from(self.max_worker_id)
            .map_or(self.servers, |max| self.servers.min(max.saturating_add(1)))
    }

    /// The lease namespace of server `server`.
    pub(crate) fn namespace(&self, server: usize) -> String {
        let base = format!("svc-{}", self.seed % 1_000_000_007);
        if self.unsafe_shared_worker_id {
            format!("{base}-s{server}")
        } else {
            base
        }
    }
}

/// Runs the fleet on `target` under the nemesis, then checks the history.
///
/// # Errors
/// [`FaultsError::Config`] for a fault the target cannot take or a bad
/// setting; [`FaultsError::Io`] for the run's directory.
pub fn run_service(target: &Target, config: &ServiceConfig) -> Result<ServiceOutcome> {
    let mut possible = ServiceFault::all_for(target);
    let labs = config
        .network
        .then(|| {
            crate::network::Labs::new(target, config.servers)
                .map(|labs| labs.lasting_at_least(config.network_faults_at_least))
        })
        .transpose()?;
    if labs.is_some() {
        possible.extend(ServiceFault::NETWORK);
    }
    if let Some(f) = config.faults.iter().find(|f| !possible.contains(f)) {
        return Err(FaultsError::Config(format!(
            "{} cannot take {f:?}",
            target.name()
        )));
    }
    if config.servers == 0 || config.ttl.subsec_nanos() != 0 || config.ttl.is_zero() {
        return Err(FaultsError::Config(
            "at least one server, and a ttl of whole seconds".into(),
        ));
    }
    let (dir, temp) = run_dir(config.dir.as_deref())?;
    let began = mono_ns();
    let mut url = target.url();
    if target.name() == "redis-durable" {
        // The segment store needs a Redis it can trust to keep writes.
        url.push_str("?durable=true");
    }
    let peer_table = match &config.peers {
        Some(peers) => {
            let table = peers.table_name(config.seed);
            block_on(create_table(&url, peers, &table, &config.tags, config.step))?;
            Some(table)
        }
        None => None,
    };
    let server_url = match &peer_table {
        Some(table) => format!(
            "{url}{}segments_table={table}",
            if url.contains('?') { '&' } else { '?' }
        ),
        None => url.clone(),
    };
    let mut servers = Vec::new();
    let (mut addresses, mut grpc_addresses) = (Vec::new(), Vec::new());
    for i in 0..config.servers {
        let (server, address, grpc) = launch(config, &dir, i, &server_url, labs.as_ref())?;
        servers.push(server);
        addresses.push(address);
        grpc_addresses.push(grpc);
    }
    let shared = Arc::new(Shared::new(config.servers));
    let migration = config.peers.map_or(Migration::Alongside, |p| p.migration);
    let third = nanos(config.duration) / 3;
    let mut threads = Vec::new();
    // Each server's HTTP clients, then its gRPC clients.
    let apis = [
        (&addresses, config.clients_per_server, false),
        (&grpc_addresses, config.grpc_clients_per_server, true),
    ];
    for (api_addresses, clients, grpc) in apis {
        for (i, &address) in api_addresses.iter().enumerate() {
            for c in 0..clients {
                let (shared, tags) = (shared.clone(), config.tags.clone());
                let pause = config.request_pause;
                threads.push(std::thread::spawn(move || {
                    if migration == Migration::TheirsThenOurs {
                        // The servers take traffic from the second third on.
                        std::thread::sleep(Duration::from_nanos(third));
                    }
                    if grpc {
                        serve_grpc_requests(&shared, i, address, &tags, c, pause);
                    } else {
                        serve_requests(&shared, i, address, &tags, c, pause);
                    }
                }));
            }
        }
    }
    for (i, &address) in grpc_addresses.iter().enumerate() {
        for _ in 0..config.client_crate_workers_per_server {
            let shared = shared.clone();
            let (namespace, pause) = (config.namespace(i), config.request_pause);
            let lease = LeaseOptions::new()
                .max_worker_id(config.max_worker_id)
                .ttl(config.ttl)
                .max_lease_time(config.ttl)
                .request_timeout(Duration::from_secs(1));
            threads.push(std::thread::spawn(move || {
                serve_client_crate(&shared, i, address, lease, &namespace, pause);
            }));
        }
    }
    if let (Some(peers), Some(table)) = (config.peers, &peer_table) {
        let (started, servers) = (mono_ns(), config.servers);
        for k in 0..peers.count {
            let (shared, tags) = (shared.clone(), config.tags.clone());
            let (url, table) = (url.clone(), table.clone());
            threads.push(std::thread::spawn(move || {
                let serving = || {
                    let at = mono_ns() - started;
                    match peers.migration {
                        Migration::Alongside => true,
                        Migration::TheirsThenOurs => at < 2 * third,
                        Migration::OursThenTheirs => at >= third,
                    }
                };
                // Recorded after the servers' indices.
                serve_as_peer(
                    &shared,
                    servers + k,
                    &url,
                    &table,
                    peers.rule,
                    peers.table == PeerTable::Leaf,
                    &tags,
                    serving,
                );
            }));
        }
    }
    let poller = {
        let (shared, url) = (shared.clone(), url.clone());
        let (namespace, max) = (config.namespace(0), config.max_worker_id);
        std::thread::spawn(move || poll_leases(&shared, &url, &namespace, max))
    };
    let mut nemesis = Nemesis {
        target,
        config,
        servers: &servers,
        labs: labs.as_ref(),
        shared: &shared,
        rng: StdRng::seed_from_u64(config.seed),
        events: Vec::new(),
        windows: Vec::new(),
        counts: BTreeMap::new(),
        dir: dir.clone(),
    };
    std::thread::scope(|scope| {
        if migration == Migration::OursThenTheirs {
            // The servers stop for good after the second third, giving
            // their tails back (SIGTERM), and the peers go on alone.
            scope.spawn(|| {
                std::thread::sleep(Duration::from_nanos(2 * third));
                for server in &servers {
                    server.process.stop();
                }
            });
        }
        nemesis.run();
    });
    let ends = nemesis.ends(mono_ns());
    shared.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let _ = poller.join();
    let ids = std::mem::take(&mut *shared.lock_ids());
    let polls = std::mem::take(&mut *shared.lock_polls());
    let options = ServiceCheckOptions {
        layout: Layout::classic(),
        ttl: config.ttl,
        recovery_bound: config.recovery_bound,
        servers: config.servers,
        serving: config.serving(),
        acknowledged: shared.acknowledged.load(Ordering::Relaxed),
    };
    let report = check_service(&ids, &polls, &ends, &options);
    let mut requests: Vec<Request> = ids
        .iter()
        .map(|r| Request {
            sent: r.sent,
            received: r.received,
        })
        .collect();
    // A batch's IDs share their request.
    requests.sort_unstable();
    requests.dedup();
    write_history(&dir, &ids);
    let path = dir.join("report.txt");
    if let Err(e) = std::fs::write(&path, report.to_string()) {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
    for (i, server) in servers.iter().enumerate() {
        let path = dir.join(format!("server-s{i}.log"));
        if let Err(e) = std::fs::write(&path, server.process.log_tail(5_000)) {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
    }
    if !report.is_safe() {
        crate::targets::save_logs(target, &dir);
        if let Some(temp) = temp {
            let _ = temp.keep();
        }
    }
    Ok(ServiceOutcome {
        seed: config.seed,
        report,
        events: nemesis.events,
        faults: nemesis.counts,
        acknowledged: options.acknowledged,
        failures: shared.failures(),
        polls: polls.len(),
        elapsed: Duration::from_nanos(mono_ns() - began),
        timeline: Timeline {
            began,
            ended: mono_ns(),
            faults: nemesis.windows,
            requests,
            issued: Vec::new(),
        },
        dir,
    })
}

/// Runs `future` to its end on a runtime of its own.
fn block_on<T>(future: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    crate::service_clients::thread_runtime("the service run")
        .ok_or_else(|| FaultsError::Config("no runtime".into()))?
        .block_on(future)
}

/// The history as text, one ID a line, for a failed run's evidence.
fn write_history(dir: &std::path::Path, ids: &[Received]) {
    let mut text = String::with_capacity(ids.len() * 48);
    for r in ids {
        let endpoint = match r.endpoint {
            Endpoint::Alloc => "alloc",
            Endpoint::LeafSegment => "segment",
            Endpoint::LeafSnowflake => "snowflake",
            Endpoint::Peer => "peer",
            Endpoint::GrpcSegment => "grpc-segment",
            Endpoint::GrpcSnowflake => "grpc-snowflake",
            Endpoint::ClientCrate => "client-crate",
        };
        text.push_str(&format!(
            "{} {} s{} {endpoint} {} {}\n",
            r.sent, r.received, r.server, r.tag, r.id
        ));
    }
    let path = dir.join("ids.txt");
    if let Err(e) = std::fs::write(&path, text) {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}
