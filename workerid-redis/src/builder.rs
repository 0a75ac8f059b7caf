//! Connecting: URL or client, single server or cluster, and options.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::{Client, RedisError};
use workerid_core::{Error, Result};

use crate::connection::Connection;
use crate::keys::{check_prefix, DEFAULT_PREFIX};
use crate::RedisStore;

/// Options of a [`RedisStore`]; made by [`RedisStore::builder`].
///
/// ```no_run
/// # async fn demo() -> workerid_core::Result<()> {
/// use std::time::Duration;
/// let store = workerid_redis::RedisStore::builder()
///     .key_prefix("myapp")
///     .durable(true) // the server runs with appendonly yes, appendfsync always
///     .response_timeout(Duration::from_secs(1))
///     .connect("redis://127.0.0.1:6379/")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    prefix: String,
    durable: bool,
    connection_timeout: Duration,
    response_timeout: Duration,
}

impl Default for RedisStoreBuilder {
    fn default() -> Self {
        RedisStoreBuilder {
            prefix: DEFAULT_PREFIX.to_string(),
            durable: false,
            connection_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
        }
    }
}

fn unavailable(e: RedisError) -> Error {
    Error::unavailable("redis", e)
}

impl RedisStoreBuilder {
    /// The first part of every key (default `workerid`): `<prefix>:{<namespace>}:...`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Declares that the server keeps every acknowledged write across a
    /// restart (`appendonly yes` and `appendfsync always`). On a single server
    /// the store checks that claim with `CONFIG GET` when it can. Default false.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// How long to wait for a connection (default 2 s).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// How long to wait for an answer (default 2 s); past it, `Unavailable`.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Connects to the server at `url` (`redis://host:port/db`).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad URL or prefix, or a `durable` claim
    /// the server's configuration denies; [`Error::Unavailable`] when the
    /// server cannot be reached.
    pub async fn connect(self, url: &str) -> Result<RedisStore> {
        let client = Client::open(url)
            .map_err(|e| Error::invalid_config(format!("bad Redis URL {url:?}: {e}")))?;
        self.connect_client(client).await
    }

    /// Connects with an existing [`redis::Client`] (the seed's
    /// `NewRedisGenerator(client, ...)`).
    ///
    /// # Errors
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect_client(self, client: Client) -> Result<RedisStore> {
        check_prefix(&self.prefix)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(1);
        let mut manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(unavailable)?;
        if self.durable {
            check_durable(&mut manager).await?;
        }
        Ok(self.store(Connection::Single(manager)))
    }

    /// Connects to a Redis Cluster through any of its nodes' URLs.
    ///
    /// # Errors
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect_cluster<S: AsRef<str>>(self, urls: &[S]) -> Result<RedisStore> {
        check_prefix(&self.prefix)?;
        let nodes: Vec<&str> = urls.iter().map(AsRef::as_ref).collect();
        let client = ClusterClientBuilder::new(nodes.clone())
            .connection_timeout(self.connection_timeout)
            .response_timeout(self.response_timeout)
            .retries(2)
            .build()
            .map_err(|e| Error::invalid_config(format!("bad Redis Cluster URLs {nodes:?}: {e}")))?;
        let connection = client.get_async_connection().await.map_err(unavailable)?;
        Ok(self.store(Connection::Cluster(connection)))
    }

    fn store(self, connection: Connection) -> RedisStore {
        RedisStore {
            connection,
            prefix: self.prefix.into(),
            durable: self.durable,
        }
    }
}

/// Refuses a `durable` claim that the server's own configuration denies.
/// A server that hides CONFIG (managed services do) is taken at its word.
async fn check_durable(manager: &mut ConnectionManager) -> Result<()> {
    let get = |name: &'static str| {
        let mut manager = manager.clone();
        async move {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async::<Vec<String>>(&mut manager)
                .await
        }
    };
    let (appendonly, appendfsync) = match (get("appendonly").await, get("appendfsync").await) {
        (Ok(a), Ok(f)) => (a.get(1).cloned(), f.get(1).cloned()),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(
                "cannot read the server's persistence settings ({e}); trusting durable = true"
            );
            return Ok(());
        }
    };
    if appendonly.as_deref() == Some("yes") && appendfsync.as_deref() == Some("always") {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "durable = true, but the server runs with appendonly {} and appendfsync {}: \
             acknowledged leases could be lost on a restart (set appendonly yes, appendfsync always)",
            appendonly.unwrap_or_default(),
            appendfsync.unwrap_or_default()
        )))
    }
}
