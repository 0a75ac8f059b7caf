//! The stores a run can target: a server started by `workerid-testkit` (that
//! the nemesis may kill and start again on the same data), or a SQLite file.

use std::path::PathBuf;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use workerid_testkit::etcd::{EtcdCluster, EtcdServer};
use workerid_testkit::mariadb::MariaDbServer;
use workerid_testkit::postgres::PostgresServer;
use workerid_testkit::redis::{RedisConfig, RedisServer};
use workerid_testkit::ServerProcess;

use crate::clock::mono_ns;
use crate::nemesis::Fault;
use crate::{FaultsError, Result};

/// What a server fault did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// For the run's log.
    pub what: String,
    /// When a server of the store was killed (SIGKILL), if one was.
    pub killed_at: Option<u64>,
}

/// A store under test.
pub trait Target: Send + Sync {
    /// A short name (`"redis"`, `"etcd-cluster"`, ...).
    fn name(&self) -> &str;
    /// The URL clients open it with (`workerid_cli::open` syntax).
    fn url(&self) -> String;
    /// The server faults it can undergo.
    fn server_faults(&self) -> Vec<Fault>;
    /// Applies a server fault: kills a server, waits a little, starts it
    /// again on the same data and waits until it answers; or freezes it
    /// (SIGSTOP) for 1.5 to 2.5 times `ttl` and thaws it.
    fn apply(&self, fault: Fault, rng: &mut StdRng, ttl: Duration) -> Applied;
    /// Whether a restart forgets every lease (Redis without persistence).
    fn forgetful(&self) -> bool {
        false
    }
    /// The servers' processes, named, whose logs a failed run keeps.
    fn processes(&self) -> Vec<(String, &ServerProcess)> {
        Vec::new()
    }
}

/// Copies the end of every server log of `target` into `dir` (evidence of
/// a failed run; the servers' own directories go away with them).
pub fn save_logs(target: &dyn Target, dir: &std::path::Path) {
    for (name, process) in target.processes() {
        let path = dir.join(format!("server-{name}.log"));
        if let Err(e) = std::fs::write(&path, process.log_tail(5_000)) {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
    }
}

/// Which store to start (for the soak binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// The in-process memory store (clients on threads of one process).
    Memory,
    /// A SQLite file in a temporary directory.
    Sqlite,
    /// `redis-server` with `appendonly yes` and `appendfsync always`.
    Redis,
    /// `redis-server` without persistence: a restart forgets everything.
    RedisVolatile,
    /// One etcd node.
    Etcd,
    /// A 3-member etcd cluster.
    EtcdCluster,
    /// PostgreSQL.
    Postgres,
    /// MariaDB.
    Mariadb,
}

/// Starts the store `kind` names (not [`StoreKind::Memory`]: see
/// [`inprocess`](crate::inprocess)).
///
/// # Errors
/// [`FaultsError::Config`] for the memory store.
pub fn start(kind: StoreKind) -> Result<Box<dyn Target>> {
    Ok(match kind {
        StoreKind::Memory => {
            return Err(FaultsError::Config(
                "the memory store runs in process (inprocess::run)".into(),
            ))
        }
        StoreKind::Sqlite => Box::new(SqliteFile::new()?),
        StoreKind::Redis => Box::new(Redis::start(true)),
        StoreKind::RedisVolatile => Box::new(Redis::start(false)),
        StoreKind::Etcd => Box::new(Etcd::start()),
        StoreKind::EtcdCluster => Box::new(Etcd3::start()),
        StoreKind::Postgres => Box::new(Sql::postgres()),
        StoreKind::Mariadb => Box::new(Sql::mariadb()),
    })
}

/// Kills `process` (SIGKILL to its process group), waits a little and
/// starts it again on the same data.
fn crash_and_restart(process: &ServerProcess, rng: &mut StdRng, name: &str) -> Applied {
    let killed_at = mono_ns();
    process.kill();
    let down = Duration::from_millis(rng.random_range(200..1_500));
    std::thread::sleep(down);
    process.start();
    Applied {
        what: format!(
            "kill -9 {name}, down {down:?}, started again in {:.1} s",
            (mono_ns() - killed_at) as f64 / 1e9
        ),
        killed_at: Some(killed_at),
    }
}

/// Freezes `process` (SIGSTOP to every process of it) for 1.5 to 2.5 ttls,
/// then thaws it: to its clients, a network partition (requests hang until
/// they time out), after which the server answers again.
fn freeze(process: &ServerProcess, rng: &mut StdRng, ttl: Duration, name: &str) -> Applied {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let pause = Duration::from_millis(rng.random_range(ttl_ms * 3 / 2..=ttl_ms * 5 / 2));
    process.pause();
    std::thread::sleep(pause);
    process.resume();
    Applied {
        what: format!("SIGSTOP {name} for {pause:?}, then SIGCONT"),
        killed_at: None,
    }
}

/// A SQLite file (WAL): no server, processes of this machine share it.
#[derive(Debug)]
pub struct SqliteFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl SqliteFile {
    /// A file in a fresh temporary directory (created by the first client).
    ///
    /// # Errors
    /// [`FaultsError::Io`] when the directory cannot be made.
    pub fn new() -> Result<SqliteFile> {
        let dir = tempfile::Builder::new()
            .prefix("workerid-faults-sqlite-")
            .tempdir()
            .map_err(crate::io_error(std::env::temp_dir()))?;
        let path = dir.path().join("ids.db");
        Ok(SqliteFile { _dir: dir, path })
    }
}

impl Target for SqliteFile {
    fn name(&self) -> &str {
        "sqlite"
    }
    fn url(&self) -> String {
        format!("sqlite://{}?mode=rwc", self.path.display())
    }
    fn server_faults(&self) -> Vec<Fault> {
        Vec::new()
    }
    fn apply(&self, fault: Fault, _rng: &mut StdRng, _ttl: Duration) -> Applied {
        Applied {
            what: format!("{fault:?}: no server"),
            killed_at: None,
        }
    }
}

/// A Redis server of the run's own.
#[derive(Debug)]
pub struct Redis {
    server: RedisServer,
    persistence: bool,
}

impl Redis {
    /// Starts `redis-server`, with `appendonly yes` + `appendfsync always`
    /// or without any persistence.
    pub fn start(persistence: bool) -> Redis {
        let server = RedisServer::start(RedisConfig {
            persistence,
            cluster_node: false,
        });
        Redis {
            server,
            persistence,
        }
    }
}

impl Target for Redis {
    fn name(&self) -> &str {
        if self.persistence {
            "redis"
        } else {
            "redis-volatile"
        }
    }
    fn url(&self) -> String {
        self.server.url()
    }
    fn server_faults(&self) -> Vec<Fault> {
        vec![Fault::RestartStore, Fault::PauseStore]
    }
    fn apply(&self, fault: Fault, rng: &mut StdRng, ttl: Duration) -> Applied {
        match fault {
            Fault::PauseStore => freeze(self.server.process(), rng, ttl, "redis-server"),
            _ => crash_and_restart(self.server.process(), rng, "redis-server"),
        }
    }
    fn forgetful(&self) -> bool {
        !self.persistence
    }
    fn processes(&self) -> Vec<(String, &ServerProcess)> {
        vec![("redis".into(), self.server.process())]
    }
}

fn etcd_url(endpoints: &[String]) -> String {
    let hosts: Vec<&str> = endpoints
        .iter()
        .map(|e| e.trim_start_matches("http://"))
        .collect();
    format!("etcd://{}", hosts.join(","))
}

/// One etcd node.
#[derive(Debug)]
pub struct Etcd(EtcdServer);

impl Etcd {
    /// Starts it.
    pub fn start() -> Etcd {
        Etcd(EtcdServer::start())
    }
}

impl Target for Etcd {
    fn name(&self) -> &str {
        "etcd"
    }
    fn url(&self) -> String {
        etcd_url(&[self.0.endpoint()])
    }
    fn server_faults(&self) -> Vec<Fault> {
        vec![Fault::RestartStore, Fault::PauseStore]
    }
    fn apply(&self, fault: Fault, rng: &mut StdRng, ttl: Duration) -> Applied {
        match fault {
            Fault::PauseStore => freeze(self.0.process(), rng, ttl, "etcd"),
            _ => crash_and_restart(self.0.process(), rng, "etcd"),
        }
    }
    fn processes(&self) -> Vec<(String, &ServerProcess)> {
        vec![("etcd".into(), self.0.process())]
    }
}

/// A 3-member etcd cluster.
#[derive(Debug)]
pub struct Etcd3(EtcdCluster);

impl Etcd3 {
    /// Starts it.
    pub fn start() -> Etcd3 {
        Etcd3(EtcdCluster::start())
    }
}

impl Target for Etcd3 {
    fn name(&self) -> &str {
        "etcd-cluster"
    }
    fn url(&self) -> String {
        etcd_url(&self.0.endpoints())
    }
    fn server_faults(&self) -> Vec<Fault> {
        vec![
            Fault::KillEtcdLeader,
            Fault::KillEtcdFollower,
            Fault::PauseStore,
            Fault::PauseEtcdLeader,
        ]
    }
    fn apply(&self, fault: Fault, rng: &mut StdRng, ttl: Duration) -> Applied {
        let node = match fault {
            Fault::KillEtcdLeader | Fault::PauseEtcdLeader => self.0.leader(),
            _ => {
                let followers: Vec<_> = self
                    .0
                    .nodes()
                    .iter()
                    .filter(|n| n.process().is_running() && !n.is_leader())
                    .collect();
                if followers.is_empty() {
                    None
                } else {
                    Some(followers[rng.random_range(0..followers.len())])
                }
            }
        };
        let Some(node) = node else {
            return Applied {
                what: format!("{fault:?}: no such member now"),
                killed_at: None,
            };
        };
        if matches!(fault, Fault::PauseStore | Fault::PauseEtcdLeader) {
            let role = if fault == Fault::PauseStore {
                "a follower"
            } else {
                "the leader"
            };
            let name = format!("etcd member {} ({role})", node.name());
            let applied = freeze(node.process(), rng, ttl, &name);
            self.0.wait_healthy(Duration::from_secs(60));
            return applied;
        }
        let killed_at = mono_ns();
        node.process().kill();
        // Down for a while: the others (a quorum of two) go on without it.
        std::thread::sleep(Duration::from_millis(rng.random_range(1_000..4_000)));
        node.process().start();
        self.0.wait_healthy(Duration::from_secs(60));
        Applied {
            what: format!(
                "kill -9 etcd member {} ({}), back and healthy after {:.1} s",
                node.name(),
                if fault == Fault::KillEtcdLeader {
                    "the leader"
                } else {
                    "a follower"
                },
                (mono_ns() - killed_at) as f64 / 1e9
            ),
            killed_at: Some(killed_at),
        }
    }
    fn processes(&self) -> Vec<(String, &ServerProcess)> {
        self.0
            .nodes()
            .iter()
            .map(|n| (format!("etcd-{}", n.name()), n.process()))
            .collect()
    }
}

/// PostgreSQL or MariaDB.
#[derive(Debug)]
pub enum Sql {
    /// PostgreSQL.
    Postgres(PostgresServer),
    /// MariaDB.
    MariaDb(MariaDbServer),
}

impl Sql {
    /// Starts PostgreSQL.
    pub fn postgres() -> Sql {
        Sql::Postgres(PostgresServer::start())
    }
    /// Starts MariaDB.
    pub fn mariadb() -> Sql {
        Sql::MariaDb(MariaDbServer::start())
    }
    fn process(&self) -> &ServerProcess {
        match self {
            Sql::Postgres(s) => s.process(),
            Sql::MariaDb(s) => s.process(),
        }
    }
}

impl Target for Sql {
    fn name(&self) -> &str {
        match self {
            Sql::Postgres(_) => "postgres",
            Sql::MariaDb(_) => "mariadb",
        }
    }
    fn url(&self) -> String {
        match self {
            Sql::Postgres(s) => s.url(),
            Sql::MariaDb(s) => s.url(),
        }
    }
    fn server_faults(&self) -> Vec<Fault> {
        vec![Fault::RestartStore, Fault::PauseStore]
    }
    fn apply(&self, fault: Fault, rng: &mut StdRng, ttl: Duration) -> Applied {
        let name = self.name().to_string();
        match fault {
            Fault::PauseStore => freeze(self.process(), rng, ttl, &name),
            _ => crash_and_restart(self.process(), rng, &name),
        }
    }
    fn processes(&self) -> Vec<(String, &ServerProcess)> {
        vec![(self.name().to_string(), self.process())]
    }
}
