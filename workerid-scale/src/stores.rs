//! The stores under test: each started by the harness (`workerid-testkit`)
//! on free loopback ports in a temporary directory, with one store handle
//! (one multiplexed connection, one pool, one etcd client) for all workers.

use std::any::Any;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use workerid_core::LeaseStore;
use workerid_testkit::etcd::{EtcdCluster, EtcdServer};
use workerid_testkit::mariadb::MariaDbServer;
use workerid_testkit::postgres::PostgresServer;
use workerid_testkit::redis::{RedisCluster, RedisConfig, RedisServer};

use crate::timed::TimedStore;
use crate::Error;

/// A kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `MemoryStore`, in this process: the client's own ceiling.
    Memory,
    /// One `redis-server`, no persistence.
    Redis,
    /// A Redis Cluster of three masters.
    RedisCluster,
    /// One etcd member.
    Etcd,
    /// Three etcd members.
    EtcdCluster,
    /// PostgreSQL.
    Postgres,
    /// MariaDB.
    MariaDb,
    /// SQLite on a file in WAL mode, in this process.
    Sqlite,
}

impl StoreKind {
    /// Every kind, in the order of the README's table.
    pub const ALL: [StoreKind; 8] = [
        StoreKind::Memory,
        StoreKind::Redis,
        StoreKind::RedisCluster,
        StoreKind::Etcd,
        StoreKind::EtcdCluster,
        StoreKind::Postgres,
        StoreKind::MariaDb,
        StoreKind::Sqlite,
    ];

    /// The name on the command line.
    pub fn flag(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis => "redis",
            StoreKind::RedisCluster => "redis-cluster",
            StoreKind::Etcd => "etcd",
            StoreKind::EtcdCluster => "etcd-cluster",
            StoreKind::Postgres => "postgres",
            StoreKind::MariaDb => "mariadb",
            StoreKind::Sqlite => "sqlite",
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreKind::Memory => "memory (in process)",
            StoreKind::Redis => "Redis",
            StoreKind::RedisCluster => "Redis Cluster (3 masters)",
            StoreKind::Etcd => "etcd (single node)",
            StoreKind::EtcdCluster => "etcd (3 members)",
            StoreKind::Postgres => "PostgreSQL",
            StoreKind::MariaDb => "MariaDB",
            StoreKind::Sqlite => "SQLite (file, WAL, in process)",
        })
    }
}

impl FromStr for StoreKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        StoreKind::ALL
            .into_iter()
            .find(|k| k.flag() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = StoreKind::ALL.iter().map(|k| k.flag()).collect();
                Error::Config(format!("unknown store {s:?}; one of {}", known.join(", ")))
            })
    }
}

/// How to connect.
#[derive(Debug, Clone, Copy)]
pub struct Connect {
    /// The SQL pool's largest number of connections.
    pub max_connections: u32,
}

impl Default for Connect {
    fn default() -> Self {
        Connect {
            max_connections: 10,
        }
    }
}

/// A store under test: the shared, timed store handle and the server behind it.
pub struct Target {
    /// Which store.
    pub kind: StoreKind,
    /// The one store handle every worker shares, timed.
    pub store: TimedStore,
    /// The server processes' pids (none for an embedded store).
    pids: Vec<u32>,
    /// Keeps the server (or the SQLite file) alive; dropping it stops the server.
    _server: Box<dyn Any + Send>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("kind", &self.kind)
            .field("pids", &self.pids)
            .finish()
    }
}

impl Target {
    /// A target on a store that is already open; `pids` are its server's
    /// processes, if it has any on this machine.
    pub fn new(
        kind: StoreKind,
        store: Arc<dyn LeaseStore>,
        pids: Vec<u32>,
        server: Box<dyn Any + Send>,
    ) -> Target {
        Target {
            kind,
            store: TimedStore::new(store),
            pids,
            _server: server,
        }
    }

    /// The shared handle, as the fleet takes it.
    pub fn shared(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.store.clone())
    }

    /// The server's root pids (their descendants count too), if any.
    pub fn server_pids(&self) -> Option<Vec<u32>> {
        (!self.pids.is_empty()).then(|| self.pids.clone())
    }

    /// Starts the server of `kind` (blocking, on a thread of its own) and
    /// connects one store handle.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be connected to.
    pub async fn start(kind: StoreKind, connect: Connect) -> Result<Target, Error> {
        let sql = |url: String| async move {
            workerid_sql::SqlStore::builder()
                .max_connections(connect.max_connections)
                .connect(&url)
                .await
        };
        let target = match kind {
            StoreKind::Memory => Target::new(
                kind,
                Arc::new(workerid_memory::MemoryStore::new()),
                Vec::new(),
                Box::new(()),
            ),
            StoreKind::Redis => {
                let server = blocking(|| RedisServer::start(RedisConfig::default())).await?;
                let store = workerid_redis::RedisStore::connect(&server.url()).await?;
                let pids = server.process().pid().into_iter().collect();
                Target::new(kind, Arc::new(store), pids, Box::new(server))
            }
            StoreKind::RedisCluster => {
                let cluster = blocking(|| RedisCluster::start(false)).await?;
                let store = workerid_redis::RedisStore::connect_cluster(&cluster.urls()).await?;
                let pids = cluster
                    .nodes()
                    .iter()
                    .filter_map(|n| n.process().pid())
                    .collect();
                Target::new(kind, Arc::new(store), pids, Box::new(cluster))
            }
            StoreKind::Etcd => {
                let node = blocking(EtcdServer::start).await?;
                let store = workerid_etcd::EtcdStore::connect([node.endpoint()]).await?;
                let pids = node.process().pid().into_iter().collect();
                Target::new(kind, Arc::new(store), pids, Box::new(node))
            }
            StoreKind::EtcdCluster => {
                let cluster = blocking(EtcdCluster::start).await?;
                let store = workerid_etcd::EtcdStore::connect(cluster.endpoints()).await?;
                let pids = cluster
                    .nodes()
                    .iter()
                    .filter_map(|n| n.process().pid())
                    .collect();
                Target::new(kind, Arc::new(store), pids, Box::new(cluster))
            }
            StoreKind::Postgres => {
                let server = blocking(PostgresServer::start).await?;
                let store = sql(server.url()).await?;
                let pids = server.process().pid().into_iter().collect();
                Target::new(kind, Arc::new(store), pids, Box::new(server))
            }
            StoreKind::MariaDb => {
                let server = blocking(MariaDbServer::start).await?;
                let store = sql(server.url()).await?;
                let pids = server.process().pid().into_iter().collect();
                Target::new(kind, Arc::new(store), pids, Box::new(server))
            }
            StoreKind::Sqlite => {
                let dir = tempfile::tempdir()?;
                let url = format!(
                    "sqlite://{}?mode=rwc",
                    dir.path().join("scale.db").display()
                );
                let store = sql(url).await?;
                Target::new(kind, Arc::new(store), Vec::new(), Box::new(dir))
            }
        };
        Ok(target)
    }
}

/// Runs a harness call (which blocks until the server answers) off the runtime.
async fn blocking<T: Send + 'static>(
    start: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(start)
        .await
        .map_err(|e| Error::Server(e.to_string()))
}
