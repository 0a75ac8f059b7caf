//! Connecting: URL or client, single server or cluster, and options.

use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster::ClusterClientBuilder;
use redis::io::tcp::TcpSettings;
use redis::{Client, RedisError};
use workerid_core::{redact_url, Error, Result};

use crate::connection::{Connection, SentinelMaster, Server, Single};
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
///     .request_timeout(Duration::from_secs(1))
///     .connect("redis://127.0.0.1:6379/")
///     .await?;
/// # Ok(()) }
/// ```
///
/// With the feature `tls-rustls` (on by default), `rediss://` URLs connect
/// over TLS, trusting the system's roots or the CA given with
/// [`ca_certificate_pem`](Self::ca_certificate_pem), and presenting the
/// client certificate given with
/// [`client_identity_pem`](Self::client_identity_pem). The driver takes its
/// TLS configuration from rustls's process-wide provider: the first TLS
/// connection installs ring as that default unless one is installed, so a
/// binary that wants another provider installs it first.
#[derive(Clone)]
pub struct RedisStoreBuilder {
    prefix: String,
    durable: bool,
    connection_timeout: Duration,
    response_timeout: Duration,
    wait_for_replicas: u32,
    #[cfg(feature = "tls-rustls")]
    tls: crate::tls::TlsMaterial,
}

/// Shows whether TLS material is set, never a key.
impl std::fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("RedisStoreBuilder");
        out.field("prefix", &self.prefix)
            .field("durable", &self.durable)
            .field("connection_timeout", &self.connection_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("wait_for_replicas", &self.wait_for_replicas);
        #[cfg(feature = "tls-rustls")]
        out.field("tls", &self.tls);
        out.finish()
    }
}

impl Default for RedisStoreBuilder {
    fn default() -> Self {
        RedisStoreBuilder {
            prefix: DEFAULT_PREFIX.to_string(),
            durable: false,
            connection_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
            wait_for_replicas: 0,
            #[cfg(feature = "tls-rustls")]
            tls: Default::default(),
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
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// How long to wait for an answer (default 2 s); past it, `Unavailable`.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Every write (acquire, renew, release, a segment reservation or
    /// give-back) waits until this many replicas have it (`WAIT`, for at
    /// most half the request timeout) before it is answered; fewer in time
    /// is `Unavailable`, though the master applied it: an acquire sent
    /// again with its token then finds its own grant. Default 0 (answered
    /// once the master has it). With replicas and failover (Sentinel, or a
    /// Redis Cluster with replicas), this is what keeps a failover from
    /// losing an acknowledged grant or range: see the Redis page of the
    /// docs for what it closes and costs. On a Redis Cluster the `WAIT`
    /// goes with the write to the master of its slot, on the same
    /// connection, and counts that master's replicas.
    pub fn wait_for_replicas(mut self, replicas: u32) -> Self {
        self.wait_for_replicas = replicas;
        self
    }

    /// Trusts only the CA of this PEM certificate (instead of the system's
    /// roots) for `rediss://` URLs.
    #[cfg(feature = "tls-rustls")]
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(pem.into());
        self
    }

    /// Presents this client certificate and private key (PEM) on
    /// `rediss://` URLs, for servers that ask for one (mutual TLS).
    #[cfg(feature = "tls-rustls")]
    pub fn client_identity_pem(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Connects to the server at `url` (`redis://host:port/db`, or
    /// `rediss://` for TLS).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad URL, certificate or prefix, a
    /// `rediss://` URL without the feature `tls-rustls`, or a `durable` claim
    /// the server's configuration denies; [`Error::Unavailable`] when the
    /// server cannot be reached or its certificate is refused.
    pub async fn connect(self, url: &str) -> Result<RedisStore> {
        let bad = |e: RedisError| {
            Error::invalid_config(format!("bad Redis URL {:?}: {e}", redact_url(url)))
        };
        let client = if is_tls(url) {
            #[cfg(feature = "tls-rustls")]
            {
                crate::tls::install_provider();
                Client::build_with_tls(url, self.tls.certificates()).map_err(bad)?
            }
            #[cfg(not(feature = "tls-rustls"))]
            return Err(no_tls(url));
        } else {
            Client::open(url).map_err(bad)?
        };
        self.connect_client(client).await
    }

    /// Connects with an existing [`redis::Client`] (libx.net/workerid's
    /// `NewRedisGenerator(client, ...)`).
    ///
    /// # Errors
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect_client(self, client: Client) -> Result<RedisStore> {
        check_prefix(&self.prefix)?;
        let info = client
            .get_connection_info()
            .clone()
            .set_tcp_settings(self.tcp_settings());
        let client = Client::open(info).map_err(unavailable)?;
        self.connect_single(Server::Fixed(client)).await
    }

    /// Connects to the master that the Sentinels at `sentinel_urls`
    /// (`redis://host:port`) know as `master_name`, and after a failover to
    /// the master they name then: an answer that says the master is gone
    /// or demoted asks them again, and they are asked every 200 ms besides
    /// (a failed master started again answers as a master until they demote
    /// it, and what is written there meanwhile is lost). The Sentinels are asked without
    /// credentials; the user, password and database of the first URL are
    /// the master's.
    ///
    /// # Errors
    /// As [`RedisStoreBuilder::connect`]; `Unavailable` also when no
    /// Sentinel names a master.
    pub async fn connect_sentinel<S: AsRef<str>>(
        self,
        sentinel_urls: &[S],
        master_name: &str,
    ) -> Result<RedisStore> {
        check_prefix(&self.prefix)?;
        let shown: Vec<String> = sentinel_urls
            .iter()
            .map(|url| redact_url(url.as_ref()))
            .collect();
        let bad = |e: RedisError| {
            Error::invalid_config(format!("bad Redis Sentinel URLs {shown:?}: {e}"))
        };
        if master_name.is_empty() {
            return Err(Error::invalid_config("the Sentinels' master name is empty"));
        }
        let mut sentinels = Vec::new();
        let mut master = None;
        for url in sentinel_urls {
            if is_tls(url.as_ref()) {
                return Err(Error::invalid_config(format!(
                    "Redis Sentinel over TLS is not supported: {:?}",
                    redact_url(url.as_ref())
                )));
            }
            let info = Client::open(url.as_ref())
                .map_err(bad)?
                .get_connection_info()
                .clone();
            let info = info.set_tcp_settings(self.tcp_settings());
            master.get_or_insert_with(|| info.clone());
            let anonymous = info.set_redis_settings(Default::default());
            sentinels.push(Client::open(anonymous).map_err(unavailable)?);
        }
        let Some(master) = master else {
            return Err(Error::invalid_config("no Redis Sentinel URL given"));
        };
        let server = Server::Sentinel(SentinelMaster::new(
            sentinels,
            master_name.to_string(),
            master,
            self.connection_timeout,
        ));
        self.connect_single(server).await
    }

    /// Connects to one server (or the master), checking a `durable` claim.
    async fn connect_single(self, server: Server) -> Result<RedisStore> {
        let single = Single::connect(server, self.manager_config())
            .await
            .map_err(unavailable)?;
        let connection = Connection::Single(single);
        check_no_eviction(&connection).await?;
        if self.durable {
            check_durable(&connection).await?;
        }
        Ok(self.store(connection))
    }

    fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(1)
    }

    /// Connects to a Redis Cluster through any of its nodes' URLs. After a
    /// failover the connection follows the slots to the promoted replica
    /// (a `MOVED` answer or a lost node refreshes the slot map);
    /// [`wait_for_replicas`](Self::wait_for_replicas) counts the replicas
    /// of the master that applied each write.
    ///
    /// # Errors
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect_cluster<S: AsRef<str>>(self, urls: &[S]) -> Result<RedisStore> {
        check_prefix(&self.prefix)?;
        let nodes: Vec<&str> = urls.iter().map(AsRef::as_ref).collect();
        #[allow(unused_mut)]
        let mut builder = ClusterClientBuilder::new(nodes.clone())
            .connection_timeout(self.connection_timeout)
            .response_timeout(self.response_timeout)
            .tcp_settings(self.tcp_settings())
            .retries(2);
        #[cfg(feature = "tls-rustls")]
        if nodes.iter().any(|url| is_tls(url)) {
            crate::tls::install_provider();
            builder = builder.certs(self.tls.certificates());
        }
        #[cfg(not(feature = "tls-rustls"))]
        if let Some(url) = nodes.iter().find(|url| is_tls(url)) {
            return Err(no_tls(url));
        }
        let client = builder.build().map_err(|e| {
            let shown: Vec<String> = nodes.iter().map(|url| redact_url(url)).collect();
            Error::invalid_config(format!("bad Redis Cluster URLs {shown:?}: {e}"))
        })?;
        let connection = client.get_async_connection().await.map_err(unavailable)?;
        Ok(self.store(Connection::Cluster(connection)))
    }

    /// What every connection's socket is set to: a request the server has
    /// not acknowledged within the request timeout ends the connection
    /// (`TCP_USER_TIMEOUT`), and a connection closed with requests still
    /// queued discards them (`SO_LINGER` 0). A request that timed out is
    /// then never delivered later, when a partition heals, to be applied
    /// after its sender has moved on (an acquire granted to no one).
    fn tcp_settings(&self) -> TcpSettings {
        TcpSettings::default()
            .set_nodelay(true)
            .set_user_timeout(self.response_timeout)
            .set_linger_time(Duration::ZERO)
    }

    fn store(self, connection: Connection) -> RedisStore {
        RedisStore {
            connection,
            prefix: self.prefix.into(),
            durable: self.durable,
            registered: Default::default(),
            wait: (self.wait_for_replicas > 0).then(|| crate::script::WaitForReplicas {
                replicas: self.wait_for_replicas,
                timeout_ms: u64::try_from(self.response_timeout.as_millis() / 2)
                    .unwrap_or(u64::MAX)
                    .max(1),
            }),
        }
    }
}

/// Whether `url` asks for TLS (`rediss://`).
fn is_tls(url: &str) -> bool {
    url.trim_start()
        .get(..9)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss://"))
}

/// The error for a `rediss://` URL in a build without TLS.
#[cfg(not(feature = "tls-rustls"))]
fn no_tls(url: &str) -> Error {
    Error::invalid_config(format!(
        "Redis URL {:?} asks for TLS: it needs the feature `tls-rustls` (of workerid, or of workerid-redis)",
        redact_url(url)
    ))
}

/// `CONFIG GET name` on the server: `[name, value]`.
async fn config_get(
    connection: &Connection,
    name: &'static str,
) -> redis::RedisResult<Vec<String>> {
    let mut manager = connection.clone();
    redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async::<Vec<String>>(&mut manager)
        .await
}

/// Refuses a server that evicts keys of any kind when it runs out of memory
/// (`maxmemory` set, `maxmemory-policy allkeys-*`): it could drop a
/// namespace's keys while their leases are live, and grant those worker IDs
/// again. The store's keys have no ttl, so a `volatile-*` policy never
/// takes them. A server that hides CONFIG is taken as it is.
async fn check_no_eviction(connection: &Connection) -> Result<()> {
    let (policy, maxmemory) = match (
        config_get(connection, "maxmemory-policy").await,
        config_get(connection, "maxmemory").await,
    ) {
        (Ok(p), Ok(m)) => (p.get(1).cloned(), m.get(1).cloned()),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!("cannot read the server's eviction settings ({e}); not checked");
            return Ok(());
        }
    };
    let policy = policy.unwrap_or_default();
    let limited = maxmemory.as_deref().is_some_and(|m| m != "0");
    if limited && policy.starts_with("allkeys-") {
        return Err(Error::invalid_config(format!(
            "the server evicts any key when it reaches maxmemory (maxmemory-policy {policy}): \
             it could drop live leases and grant their worker IDs again \
             (use noeviction or a volatile-* policy)"
        )));
    }
    Ok(())
}

/// Refuses a `durable` claim that the server's own configuration denies.
/// A server that hides CONFIG (managed services do) is taken at its word.
async fn check_durable(connection: &Connection) -> Result<()> {
    let get = |name: &'static str| config_get(connection, name);
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
