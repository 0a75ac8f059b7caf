//! The one list of the stores the harness can run, and one way to start any
//! of them: a [`StoreKind`] gives a [`RunningStore`], whose URL opens it
//! with `workerid::open` and whose drop stops it.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::etcd::{EtcdCluster, EtcdServer};
use crate::mariadb::MariaDbServer;
use crate::postgres::PostgresServer;
use crate::redis::{RedisCluster, RedisConfig, RedisServer};
use crate::ServerProcess;

/// A store as the harness runs it: which server, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// The in-process memory store: no server.
    Memory,
    /// A SQLite file (WAL) in a temporary directory: no server.
    Sqlite,
    /// One `redis-server` without persistence: a restart forgets everything.
    Redis,
    /// One `redis-server` with `appendonly yes` and `appendfsync always`.
    RedisDurable,
    /// A Redis Cluster of three masters, without persistence.
    RedisCluster,
    /// One etcd member.
    Etcd,
    /// Three etcd members.
    EtcdCluster,
    /// PostgreSQL.
    Postgres,
    /// MariaDB.
    MariaDb,
}

impl StoreKind {
    /// Every kind.
    pub const ALL: [StoreKind; 9] = [
        StoreKind::Memory,
        StoreKind::Sqlite,
        StoreKind::Redis,
        StoreKind::RedisDurable,
        StoreKind::RedisCluster,
        StoreKind::Etcd,
        StoreKind::EtcdCluster,
        StoreKind::Postgres,
        StoreKind::MariaDb,
    ];

    /// The kinds of one server (or file) that keep their data on a disk
    /// of their own: what a disk fault is tried on.
    pub const ON_A_DISK: [StoreKind; 5] = [
        StoreKind::Sqlite,
        StoreKind::RedisDurable,
        StoreKind::Etcd,
        StoreKind::Postgres,
        StoreKind::MariaDb,
    ];

    /// The name on a command line: `memory`, `sqlite`, `redis`,
    /// `redis-durable`, `redis-cluster`, `etcd`, `etcd-cluster`, `postgres`,
    /// `mariadb`.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Sqlite => "sqlite",
            StoreKind::Redis => "redis",
            StoreKind::RedisDurable => "redis-durable",
            StoreKind::RedisCluster => "redis-cluster",
            StoreKind::Etcd => "etcd",
            StoreKind::EtcdCluster => "etcd-cluster",
            StoreKind::Postgres => "postgres",
            StoreKind::MariaDb => "mariadb",
        }
    }

    /// A name for tables and reports (`"Redis Cluster (3 masters)"`).
    pub fn title(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory (in process)",
            StoreKind::Sqlite => "SQLite (file, WAL)",
            StoreKind::Redis => "Redis",
            StoreKind::RedisDurable => "Redis (appendfsync always)",
            StoreKind::RedisCluster => "Redis Cluster (3 masters)",
            StoreKind::Etcd => "etcd (single node)",
            StoreKind::EtcdCluster => "etcd (3 members)",
            StoreKind::Postgres => "PostgreSQL",
            StoreKind::MariaDb => "MariaDB",
        }
    }

    /// Whether the store runs inside the client's process (no server).
    pub fn in_process(self) -> bool {
        matches!(self, StoreKind::Memory | StoreKind::Sqlite)
    }

    /// Starts a store of this kind of its own, and waits until it answers.
    pub fn start(self) -> RunningStore {
        let servers = match self {
            StoreKind::Memory => Servers::None,
            StoreKind::Sqlite => {
                Servers::SqliteFile(crate::small_disk::temp_dir("workerid-sqlite-"))
            }
            StoreKind::Redis | StoreKind::RedisDurable => {
                Servers::Redis(RedisServer::start(RedisConfig {
                    persistence: self == StoreKind::RedisDurable,
                    ..RedisConfig::default()
                }))
            }
            StoreKind::RedisCluster => Servers::RedisCluster(RedisCluster::start(false)),
            StoreKind::Etcd => Servers::Etcd(EtcdServer::start()),
            StoreKind::EtcdCluster => Servers::EtcdCluster(EtcdCluster::start()),
            StoreKind::Postgres => Servers::Postgres(PostgresServer::start()),
            StoreKind::MariaDb => Servers::MariaDb(MariaDbServer::start()),
        };
        RunningStore {
            kind: self,
            servers,
        }
    }

    /// The URL of the store of this kind that every test of this binary
    /// shares (started once, on first use; the `WORKERID_*` variables point
    /// tests at existing servers instead).
    pub fn shared_url(self) -> String {
        match self {
            StoreKind::Memory => "memory://".to_string(),
            StoreKind::Sqlite => {
                static SHARED: OnceLock<String> = OnceLock::new();
                SHARED
                    .get_or_init(|| {
                        let dir = crate::binary_temp_dir("workerid-sqlite-");
                        crate::sqlite_url(&dir.join("ids.db"))
                    })
                    .clone()
            }
            StoreKind::Redis => crate::redis::shared_url(),
            StoreKind::RedisDurable => {
                static SHARED: OnceLock<String> = OnceLock::new();
                SHARED
                    .get_or_init(|| Box::leak(Box::new(StoreKind::RedisDurable.start())).url())
                    .clone()
            }
            StoreKind::RedisCluster => cluster_url(&crate::redis::shared_cluster_urls()),
            StoreKind::Etcd => etcd_url(&crate::etcd::shared_endpoints()),
            StoreKind::EtcdCluster => etcd_url(&crate::etcd::shared_cluster_endpoints()),
            StoreKind::Postgres => crate::postgres::shared_url(),
            StoreKind::MariaDb => crate::mariadb::shared_url(),
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StoreKind {
    type Err = String;

    /// A kind by its [`name`](StoreKind::name).
    fn from_str(name: &str) -> Result<StoreKind, String> {
        StoreKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = StoreKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown store {name:?}; one of {}", names.join(", "))
            })
    }
}

/// The servers behind a [`RunningStore`], for tests that stop, kill or
/// freeze them.
#[derive(Debug)]
pub enum Servers {
    /// The memory store: nothing runs.
    None,
    /// The SQLite file's directory.
    SqliteFile(tempfile::TempDir),
    /// One Redis server.
    Redis(RedisServer),
    /// A Redis Cluster.
    RedisCluster(RedisCluster),
    /// One etcd member.
    Etcd(EtcdServer),
    /// Three etcd members.
    EtcdCluster(EtcdCluster),
    /// PostgreSQL.
    Postgres(PostgresServer),
    /// MariaDB.
    MariaDb(MariaDbServer),
}

/// A store the harness started: its URL, and its servers, stopped when this
/// is dropped.
#[derive(Debug)]
pub struct RunningStore {
    kind: StoreKind,
    servers: Servers,
}

impl RunningStore {
    /// A 3-member etcd cluster whose members run apart, each in a network
    /// namespace of its own, so that one can be cut from the others
    /// ([`EtcdCluster::start_apart`]; needs root).
    pub fn etcd_cluster_apart() -> RunningStore {
        RunningStore {
            kind: StoreKind::EtcdCluster,
            servers: Servers::EtcdCluster(EtcdCluster::start_apart()),
        }
    }

    /// Which store.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The URL that opens it (`workerid::open`, the CLI's `--store`, the
    /// server's `store =`).
    pub fn url(&self) -> String {
        match &self.servers {
            Servers::None => "memory://".to_string(),
            Servers::SqliteFile(dir) => crate::sqlite_url(&dir.path().join("ids.db")),
            Servers::Redis(server) => server.url(),
            Servers::RedisCluster(cluster) => cluster_url(&cluster.urls()),
            Servers::Etcd(node) => etcd_url(&[node.endpoint()]),
            Servers::EtcdCluster(cluster) => etcd_url(&cluster.endpoints()),
            Servers::Postgres(server) => server.url(),
            Servers::MariaDb(server) => server.url(),
        }
    }

    /// The servers.
    pub fn servers(&self) -> &Servers {
        &self.servers
    }

    /// Every server process, named (`redis`, `etcd-n1`, ...).
    pub fn processes(&self) -> Vec<(String, &ServerProcess)> {
        match &self.servers {
            Servers::None | Servers::SqliteFile(_) => Vec::new(),
            Servers::Redis(server) => vec![("redis".into(), server.process())],
            Servers::RedisCluster(cluster) => cluster
                .nodes()
                .iter()
                .enumerate()
                .map(|(i, node)| (format!("redis-{i}"), node.process()))
                .collect(),
            Servers::Etcd(node) => vec![("etcd".into(), node.process())],
            Servers::EtcdCluster(cluster) => cluster
                .nodes()
                .iter()
                .map(|node| (format!("etcd-{}", node.name()), node.process()))
                .collect(),
            Servers::Postgres(server) => vec![("postgres".into(), server.process())],
            Servers::MariaDb(server) => vec![("mariadb".into(), server.process())],
        }
    }

    /// What the server's program says its version is (None in process).
    pub fn server_version(&self) -> Option<String> {
        self.processes().first()?.1.version()
    }

    /// The pids of the running server processes (their children count too).
    pub fn pids(&self) -> Vec<u32> {
        self.processes()
            .iter()
            .filter_map(|(_, process)| process.pid())
            .collect()
    }
}

/// `redis+cluster://host:port,...` from the nodes' `redis://host:port/` URLs.
fn cluster_url(nodes: &[String]) -> String {
    let hosts: Vec<&str> = nodes
        .iter()
        .map(|url| url.trim_start_matches("redis://").trim_end_matches('/'))
        .collect();
    format!("redis+cluster://{}", hosts.join(","))
}

/// `etcd://host:port,...` from `http://host:port` endpoints.
fn etcd_url(endpoints: &[String]) -> String {
    let hosts: Vec<&str> = endpoints
        .iter()
        .map(|e| e.trim_start_matches("http://"))
        .collect();
    format!("etcd://{}", hosts.join(","))
}
