//! Opening a store from its URL: the scheme picks the store crate.

use std::time::Duration;

#[macro_use]
mod cause;
#[cfg(feature = "etcd")]
mod etcd;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod sql;
#[cfg(any(feature = "redis", feature = "etcd"))]
mod tls_files;

with_drivers! {
    pub(crate) use cause::connect_error;
}
pub use cause::FailureCause;

use std::sync::Arc;

use crate::any_store::BothStores;
use crate::store_url::StoreUrl;
use crate::{AnyStore, OpenError, StoreKind};

/// Opens the store `url` names, with the default [`OpenOptions`].
///
/// | URL | store |
/// | --- | --- |
/// | `memory://` | a new, empty in-process store |
/// | `redis://[[user]:password@]host[:port][/db]`, `rediss://` (TLS) | one Redis server |
/// | `redis+cluster://host:port,host:port`, `rediss+cluster://` (TLS) | a Redis Cluster |
/// | `redis+sentinel://[[user]:password@]host:port,host:port/master[/db]` | the master Redis Sentinels name (the addresses are theirs), followed across failovers |
/// | `etcd://[user:password@]host:port,host:port[/prefix]`, `etcds://` (TLS) | etcd (key prefix default `workerid`) |
/// | `postgres://`, `postgresql://` | PostgreSQL (sqlx's URL: `sslmode`, `sslrootcert`, ...) |
/// | `mysql://`, `mariadb://` | MySQL or MariaDB (sqlx's URL: `ssl-mode`, `ssl-ca`, ...) |
/// | `sqlite://PATH` (`?mode=rwc` creates the file) | SQLite |
///
/// Options in the query: Redis takes `prefix=` (key prefix), `durable=true`
/// (the server keeps every write: `appendonly yes`, `appendfsync always`),
/// `wait_replicas=N` (every write waits for N replicas of the master that
/// applied it, `WAIT`: behind Sentinels or on a Redis Cluster, so that a
/// failover loses no acknowledged write), and, over TLS, `cacert=FILE` (trust this CA instead of the system's),
/// `cert=FILE` and `key=FILE` (a client certificate); etcd takes `cacert`,
/// `cert` and `key`. The SQL stores take `lease_table=`, `segments_table=`
/// (`leaf_alloc` for Leaf's table; default `segments`, go-id-alloc's) and
/// `segment_versions=false` (keep the segment table exactly as it is: no
/// give-backs), and the parameters sqlx reads for that database; any other
/// parameter is refused, for every store. A Redis database number is plain
/// decimal digits, and `protocol=` one of `2`, `resp2`, `3`, `resp3`. User
/// names and passwords are percent-decoded (`%2F` for `/`, `%40` for `@`); a
/// `?` or `#` in them must be encoded (`%3F`, `%23`), and so must an `@` in
/// a parameter: an `@` after a raw `?` or `#` is refused.
///
/// Each kind needs its feature of this crate (`memory`, on by default;
/// `redis`, `etcd`, `postgres`, `mysql`, `sqlite`, or `all`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), workerid::OpenError> {
/// let store = workerid::open("memory://").await?;
/// assert!(matches!(
///     workerid::open("ftp://me:secret@host/").await,
///     Err(workerid::OpenError::UnknownScheme { url }) if !url.contains("secret")
/// ));
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`OpenError::UnknownScheme`], [`OpenError::NotCompiledIn`],
/// [`OpenError::BadUrl`] and [`OpenError::File`] before any I/O;
/// [`OpenError::Unreachable`] when the store does not answer within the
/// connect timeout, refuses the connection or fails the TLS handshake;
/// [`OpenError::AccessDenied`] when it refuses the credentials;
/// [`OpenError::NotFound`] when the database the URL names does not exist;
/// [`OpenError::WrongProtocol`] when what answers is not that kind of store;
/// [`OpenError::Refused`] when it answers but cannot be used as asked. No
/// error contains the password.
pub async fn open(url: &str) -> Result<AnyStore, OpenError> {
    OpenOptions::new().open(url).await
}

/// How [`open`] connects: timeouts and pool size. Unset values are the
/// store's own defaults.
///
/// ```
/// # async fn demo() -> Result<(), workerid::OpenError> {
/// use std::time::Duration;
/// let store = workerid::OpenOptions::new()
///     .connect_timeout(Duration::from_secs(3))
///     .request_timeout(Duration::from_secs(1))
///     .open("memory://")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) max_connections: Option<u32>,
    pub(crate) read_only: bool,
}

impl OpenOptions {
    /// The stores' own defaults.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// How long to wait for a connection (a SQL pool: for a connection from
    /// the pool).
    pub fn connect_timeout(mut self, timeout: Duration) -> OpenOptions {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long to wait for one answer, on every store; past it, the call
    /// fails with `Unavailable` (and may or may not have taken effect, as
    /// any `Unavailable` call). The default: none but the store's own
    /// (Redis and etcd have theirs; a SQL statement waits for its locks).
    pub fn request_timeout(mut self, timeout: Duration) -> OpenOptions {
        self.request_timeout = Some(timeout);
        self
    }

    /// The largest number of connections of a SQL store's pool.
    pub fn max_connections(mut self, max: u32) -> OpenOptions {
        self.max_connections = Some(max);
        self
    }

    /// Opens for reading only: nothing is created on connecting (a SQL
    /// store's tables, SQLite's WAL switch), and a SQL database without
    /// the tables is [`OpenError::NotFound`] ("not initialised"). What an
    /// operator's tool wants when a mistyped database name must stay
    /// untouched. Default false.
    pub fn read_only(mut self, read_only: bool) -> OpenOptions {
        self.read_only = read_only;
        self
    }

    /// Opens the store `url` names (see [`open`]).
    ///
    /// # Errors
    /// As [`open`].
    pub async fn open(&self, url: &str) -> Result<AnyStore, OpenError> {
        let url = StoreUrl::parse(url)?;
        let opened: Result<Opened, OpenError> = match url.kind {
            #[cfg(feature = "memory")]
            StoreKind::Memory => Ok(Arc::new(workerid_memory::MemoryStore::new())),
            #[cfg(feature = "redis")]
            StoreKind::Redis | StoreKind::RedisCluster | StoreKind::RedisSentinel => {
                redis::open(self, &url).await
            }
            #[cfg(feature = "etcd")]
            StoreKind::Etcd => etcd::open(self, &url).await,
            #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
            StoreKind::Postgres | StoreKind::MySql | StoreKind::Sqlite => {
                sql::open(self, &url).await
            }
            // StoreUrl::parse refused the kinds this build leaves out.
            #[allow(unreachable_patterns)]
            _ => Err(OpenError::NotCompiledIn {
                url: url.redacted.clone(),
                kind: url.kind,
                feature: url.kind.feature(),
            }),
        };
        let address = url.server_address();
        opened.map(|store| {
            AnyStore::from_opened(
                url.kind,
                &url.redacted,
                address,
                store,
                self.request_timeout,
            )
        })
    }
}

/// A store just opened, before it is wrapped.
pub(crate) type Opened = Arc<dyn BothStores>;
