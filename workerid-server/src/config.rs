//! The TOML configuration.

use std::path::PathBuf;
use std::time::Duration;

use crate::auth::BearerTokens;
use serde::Deserialize;

mod snowflake;

pub use snowflake::SnowflakeConfig;

/// The smallest `max_buffer_bytes`: room for the largest head the fast path
/// parses, twice.
pub const MIN_BUFFER_BYTES: usize = 2 * crate::fast_path::MAX_HEAD;

/// The longest snowflake lease ttl, in seconds (one day): a lease that
/// outlives its holder keeps its worker ID from every other server that long,
/// and the periods derived from the ttl stay far from `Duration`'s limits.
pub const MAX_TTL_SECS: u64 = 86_400;

/// Why a configuration was refused. None of its messages shows a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `snowflake.ttl_secs` outside `1..=MAX_TTL_SECS`.
    #[error("snowflake.ttl_secs must be 1 to {MAX_TTL_SECS} (one day), not {ttl_secs}")]
    TtlOutOfRange {
        /// The value given.
        ttl_secs: u64,
    },
    /// An empty `auth_token` or `operator_token` (the setting named).
    #[error("{setting} must not be empty")]
    AuthTokenEmpty {
        /// The setting.
        setting: &'static str,
    },
    /// An `auth_token` or `operator_token` with a byte that is not visible
    /// ASCII (`!` to `~`): no client could send it in an `Authorization`
    /// header or gRPC metadata. The token itself is not kept.
    #[error(
        "{setting} may hold only visible ASCII characters (! to ~; no spaces, control \
         characters or non-ASCII letters): no client could send this one (not shown)"
    )]
    AuthTokenNotSendable {
        /// The setting.
        setting: &'static str,
    },
    /// Any other value out of its range, or settings that do not fit
    /// together: the message names the setting.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for ConfigError {
    fn from(message: String) -> Self {
        ConfigError::Invalid(message)
    }
}

impl From<&str> for ConfigError {
    fn from(message: &str) -> Self {
        ConfigError::Invalid(message.to_owned())
    }
}

/// What `workerid-server` serves, from where. Its `Debug` hides the store
/// URL's password and the bearer token.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The store, by URL as the `workerid` CLI takes it: `sqlite://...`,
    /// `postgres://...`, `mysql://...`, `redis://...` or `etcd://host:port,...`.
    #[serde(default = "default_store")]
    pub store: String,
    /// The address to listen on.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The address of the gRPC API (`workerid.v1.Ids`, `workerid.v1.Leases`,
    /// `workerid.v1.Segments` and the health service; see workerid-proto), a
    /// port of its own; none: no gRPC.
    #[serde(default)]
    pub grpc_listen: Option<String>,
    /// TLS on the gRPC port: the server's certificate chain and its key
    /// (PEM files); both or neither.
    #[serde(default)]
    pub grpc_tls_cert: Option<PathBuf>,
    #[serde(default)]
    pub grpc_tls_key: Option<PathBuf>,
    /// With TLS: only clients with a certificate this CA (PEM file) signed.
    #[serde(default)]
    pub grpc_tls_client_ca: Option<PathBuf>,
    /// How long a gRPC connection may be silent before the server pings it,
    /// and how long the ping may go unanswered before the server closes
    /// it, in milliseconds (default 10 000): a client that vanished
    /// without a word (its host gone, a balancer that forgot the
    /// connection) frees its streams within twice this.
    #[serde(default = "default_grpc_keepalive")]
    pub grpc_keepalive_ms: u64,
    /// The secret the gRPC `Reserve` signs its ranges with, so that a
    /// `GiveBack` is taken only for a range a client reserved (none: a key
    /// drawn at random on start, so only the server that reserved a range
    /// takes it back). The servers of one store share it, and those of
    /// another store use another; at least 16 bytes.
    #[serde(default)]
    pub give_back_key: Option<String>,
    /// How long one segment store call may take, in milliseconds (default
    /// 3000): past it the request fails (HTTP 500, `store_unavailable`) and shutdown moves on.
    #[serde(default = "default_store_timeout")]
    pub store_timeout_ms: u64,
    /// How often the server rereads the tag list, in milliseconds (default
    /// 5000): a tag created elsewhere is served within that time; unknown
    /// names are answered from this view, without a store call.
    #[serde(default = "default_tags_refresh")]
    pub tags_refresh_ms: u64,
    /// Serve segments from a store whose counters do not survive its
    /// restart (default false: the server refuses to start on one, since a
    /// restarted store would hand out IDs again).
    #[serde(default)]
    pub allow_volatile_segments: bool,
    /// Answer `GET /alloc` on the fast path (default true); false serves
    /// every request through hyper.
    #[serde(default = "yes")]
    pub fast_path: bool,
    /// How long a keep-alive connection may sit idle, in milliseconds
    /// (default 60 000); also the longest a request head may take to arrive
    /// when shorter than 30 s.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_ms: u64,
    /// The most connections open at once (default 10 000); past it the
    /// server stops accepting until one closes.
    #[serde(default = "default_max_open_connections")]
    pub max_open_connections: usize,
    /// The most bytes buffered per connection, read or to be written
    /// (default 65 536, at least 32 768); a request head that does not fit
    /// closes the connection.
    #[serde(default = "default_max_buffer_bytes")]
    pub max_buffer_bytes: usize,
    /// The bearer token every request must carry, or a list of tokens of
    /// which it must carry one (to rotate them); none: no check. Visible
    /// ASCII only, as a header or gRPC metadata carries nothing else.
    #[serde(default)]
    pub auth_token: BearerTokens,
    /// The bearer token (or tokens) the operator's gRPC calls must carry
    /// (`Leases.ForceRelease`, `Leases.RemoveNamespace`,
    /// `Segments.CreateTag`); none: those calls take `auth_token` as every
    /// other does. Visible ASCII only.
    #[serde(default)]
    pub operator_token: BearerTokens,
    /// The most IDs one request may ask for with `count` (default 10 000,
    /// at most 1 000 000).
    #[serde(default = "default_max_batch")]
    pub max_batch: u64,
    /// Where to send traces over OTLP/gRPC (`http://collector:4317`); none:
    /// traces are not exported.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
    /// Tags created on start when missing. A tag that exists with another
    /// step is refused: the server does not start (change the config, or
    /// the stored tag). With no tags and the zero-configuration store (the
    /// SQLite file `workerid.db`), the tag `test` is made, so a first
    /// `curl` works.
    #[serde(default)]
    pub tags: Vec<TagConfig>,
    /// The snowflake worker.
    #[serde(default)]
    pub snowflake: SnowflakeConfig,
    /// Threads serving requests (default: one per CPU). 1 serves every
    /// request on one thread (a current-thread runtime; the SQLite driver
    /// keeps its own thread), the fastest where the machine's other cores
    /// are busy with something else (a load generator, a database).
    #[serde(default)]
    pub workers: Option<usize>,
}

/// A tag created on start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagConfig {
    /// Its name.
    pub name: String,
    /// Its first ID.
    #[serde(default = "one")]
    pub first_id: u64,
    /// Its default step.
    #[serde(default = "default_step")]
    pub step: u64,
}

impl Config {
    /// The connection limits.
    pub fn limits(&self) -> crate::serve::Limits {
        crate::serve::Limits {
            fast_path: self.fast_path,
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_open_connections: self.max_open_connections,
            max_buffer_bytes: self.max_buffer_bytes,
        }
    }

    /// The tag list's refresh period.
    pub fn tags_refresh(&self) -> Duration {
        Duration::from_millis(self.tags_refresh_ms)
    }

    /// The timeout of one segment store call.
    pub fn store_timeout(&self) -> Duration {
        Duration::from_millis(self.store_timeout_ms)
    }

    /// Whether segments may be served from the store: yes when its
    /// counters are `durable`, or when `allow_volatile_segments` says so
    /// (the caller then logs a warning: `Ok(false)`).
    ///
    /// # Errors
    /// A message naming the store and what to change, when they are not
    /// durable and volatile segments are not allowed.
    pub fn check_segments_durable(
        &self,
        kind: workerid::StoreKind,
        durable: bool,
    ) -> Result<bool, String> {
        if durable {
            return Ok(true);
        }
        if self.allow_volatile_segments {
            return Ok(false);
        }
        let fix = match kind {
            workerid::StoreKind::Redis
            | workerid::StoreKind::RedisCluster
            | workerid::StoreKind::RedisSentinel => {
                "add durable=true to the Redis URL, for a Redis server with \
                 appendonly yes and appendfsync always"
            }
            workerid::StoreKind::Sqlite => "use a SQLite file rather than an in-memory database",
            _ => "use a durable store (a SQL database, etcd, or Redis with durable=true)",
        };
        Err(format!(
            "the store's segment counters are not durable: after a restart of the store, \
             IDs already handed out would be handed out again. To fix it, {fix}; or, to \
             accept duplicate IDs after a store restart, set allow_volatile_segments = true \
             (environment: WORKERID_ALLOW_VOLATILE_SEGMENTS=true, flag: \
             --allow-volatile-segments true)"
        ))
    }

    /// The tags to create on start: the config's, or with none and the
    /// zero-configuration store, the tag `test`.
    pub fn startup_tags(&self) -> Vec<TagConfig> {
        if self.tags.is_empty() && self.store == default_store() {
            default_tags()
        } else {
            self.tags.clone()
        }
    }

    /// Checks the values serde cannot, before anything touches the store:
    /// ranges, names, duplicate tags, and how the lease periods fit.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the setting at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::BTreeSet::new();
        for tag in &self.tags {
            workerid::segment::Tag::new(tag.name.as_str())
                .map_err(|e| format!("[[tags]] name {:?}: {e}", tag.name))?;
            if !seen.insert(tag.name.as_str()) {
                return Err(format!("[[tags]] name {:?} is given twice", tag.name).into());
            }
            workerid::segment::check_step(tag.step)
                .map_err(|e| format!("[[tags]] {:?}: {e}", tag.name))?;
            // A reservation takes a whole step: a tag whose first one does
            // not fit would never serve an ID.
            workerid::segment::check_first_range(tag.first_id, tag.step)
                .map_err(|e| format!("[[tags]] {:?} first_id and step: {e}", tag.name))?;
        }
        if self.snowflake.enabled {
            workerid::Namespace::new(self.snowflake.namespace.as_str())
                .map_err(|e| format!("snowflake.namespace: {e}"))?;
            self.snowflake.holder()?;
        }
        if let Some(n) = self.workers {
            if !(1..=1024).contains(&n) {
                return Err(format!("workers must be 1 to 1024, not {n}").into());
            }
        }
        for token in self.auth_token.iter() {
            check_auth_token("auth_token", token)?;
        }
        for token in self.operator_token.iter() {
            check_auth_token("operator_token", token)?;
        }
        if self
            .give_back_key
            .as_ref()
            .is_some_and(|key| key.len() < 16)
        {
            return Err("give_back_key must be at least 16 bytes long".into());
        }
        if self.grpc_keepalive_ms == 0 {
            return Err("grpc_keepalive_ms must be at least 1".into());
        }
        if self.idle_timeout_ms == 0 {
            return Err("idle_timeout_ms must be at least 1".into());
        }
        if !(1..=MAX_OPEN_CONNECTIONS).contains(&self.max_open_connections) {
            return Err(format!(
                "max_open_connections must be 1 to {MAX_OPEN_CONNECTIONS}, not {}",
                self.max_open_connections
            )
            .into());
        }
        if self.max_buffer_bytes < MIN_BUFFER_BYTES {
            return Err(format!("max_buffer_bytes must be at least {MIN_BUFFER_BYTES}").into());
        }
        if !(1..=crate::batch::LARGEST_MAX_BATCH).contains(&self.max_batch) {
            return Err(format!(
                "max_batch must be 1 to {}, not {}",
                crate::batch::LARGEST_MAX_BATCH,
                self.max_batch
            )
            .into());
        }
        match (&self.grpc_tls_cert, &self.grpc_tls_key) {
            (Some(_), None) | (None, Some(_)) => {
                return Err("grpc_tls_cert and grpc_tls_key go together".into())
            }
            (None, None) if self.grpc_tls_client_ca.is_some() => {
                return Err("grpc_tls_client_ca needs grpc_tls_cert and grpc_tls_key".into())
            }
            _ => {}
        }
        if self.grpc_listen.is_none() && self.grpc_tls_cert.is_some() {
            return Err("grpc_tls_cert is set but grpc_listen is not".into());
        }
        if let Some(endpoint) = &self.otlp_endpoint {
            crate::traces::check_endpoint(endpoint)?;
        }
        if self.tags_refresh_ms < 100 {
            return Err("tags_refresh_ms must be at least 100".into());
        }
        if self.store_timeout_ms == 0 {
            return Err("store_timeout_ms must be at least 1".into());
        }
        let s = &self.snowflake;
        // Checked even when off: gRPC's `Decode` reads IDs by it.
        let layout = s.layout()?;
        if s.enabled {
            if !(1..=MAX_TTL_SECS).contains(&s.ttl_secs) {
                return Err(ConfigError::TtlOutOfRange {
                    ttl_secs: s.ttl_secs,
                });
            }
            let layout_max = layout.max_worker_id();
            if let Some(max) = s.max_worker_id.filter(|&max| max > layout_max) {
                return Err(format!(
                    "snowflake.max_worker_id {max} does not fit the {} layout's worker bits (at most {layout_max})",
                    s.layout
                ).into());
            }
            let (every, timeout) = (s.renew_every(), s.renew_timeout());
            if every.is_zero() || every >= s.ttl() {
                return Err(format!(
                    "snowflake: renewing every {every:?} does not fit a ttl of {:?} (0 < renew_every_ms < ttl)",
                    s.ttl()
                ).into());
            }
            if timeout.is_zero() || timeout >= every {
                return Err(format!(
                    "snowflake: a renew timeout of {timeout:?} must be shorter than the renewal period {every:?} \
                     (renew_timeout_ms < renew_every_ms)"
                ).into());
            }
        }
        Ok(())
    }
}

/// Checks that `token` can be sent: gRPC metadata and `Authorization`
/// header values carry visible ASCII only, and a bearer token is one word
/// (a space at either end would be trimmed on the way).
///
/// # Errors
/// [`ConfigError::AuthTokenEmpty`], [`ConfigError::AuthTokenNotSendable`].
fn check_auth_token(setting: &'static str, token: &str) -> Result<(), ConfigError> {
    if token.is_empty() {
        return Err(ConfigError::AuthTokenEmpty { setting });
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConfigError::AuthTokenNotSendable { setting });
    }
    Ok(())
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("store", &workerid::redact_url(&self.store))
            .field("listen", &self.listen)
            .field("grpc_listen", &self.grpc_listen)
            .field("grpc_tls_cert", &self.grpc_tls_cert)
            .field("grpc_tls_key", &self.grpc_tls_key)
            .field("grpc_tls_client_ca", &self.grpc_tls_client_ca)
            .field("grpc_keepalive_ms", &self.grpc_keepalive_ms)
            .field("store_timeout_ms", &self.store_timeout_ms)
            .field("tags_refresh_ms", &self.tags_refresh_ms)
            .field("fast_path", &self.fast_path)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("max_open_connections", &self.max_open_connections)
            .field("max_buffer_bytes", &self.max_buffer_bytes)
            .field("max_batch", &self.max_batch)
            .field(
                "otlp_endpoint",
                &self.otlp_endpoint.as_deref().map(workerid::redact_url),
            )
            .field("auth_token", &self.auth_token)
            .field("operator_token", &self.operator_token)
            .field("give_back_key", &self.give_back_key.as_ref().map(|_| "***"))
            .field("allow_volatile_segments", &self.allow_volatile_segments)
            .field("tags", &self.tags)
            .field("snowflake", &self.snowflake)
            .field("workers", &self.workers)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            store: default_store(),
            listen: default_listen(),
            grpc_listen: None,
            grpc_tls_cert: None,
            grpc_tls_key: None,
            grpc_tls_client_ca: None,
            grpc_keepalive_ms: default_grpc_keepalive(),
            give_back_key: None,
            store_timeout_ms: default_store_timeout(),
            tags_refresh_ms: default_tags_refresh(),
            allow_volatile_segments: false,
            fast_path: true,
            auth_token: BearerTokens::default(),
            operator_token: BearerTokens::default(),
            idle_timeout_ms: default_idle_timeout(),
            max_open_connections: default_max_open_connections(),
            max_buffer_bytes: default_max_buffer_bytes(),
            max_batch: default_max_batch(),
            otlp_endpoint: None,
            tags: Vec::new(),
            snowflake: SnowflakeConfig::default(),
            workers: None,
        }
    }
}

fn default_max_batch() -> u64 {
    crate::batch::DEFAULT_MAX_BATCH
}

fn default_store() -> String {
    "sqlite://workerid.db?mode=rwc".into()
}
fn default_listen() -> String {
    "127.0.0.1:8880".into()
}
/// The tag made when the config names none and the store is the
/// zero-configuration one.
fn default_tags() -> Vec<TagConfig> {
    vec![TagConfig {
        name: "test".into(),
        first_id: 1,
        step: default_step(),
    }]
}
fn default_store_timeout() -> u64 {
    3_000
}
fn default_tags_refresh() -> u64 {
    5_000
}
fn default_grpc_keepalive() -> u64 {
    10_000
}
fn default_idle_timeout() -> u64 {
    60_000
}
/// The most connections `max_open_connections` may allow: far above what
/// one process's file descriptors hold, far below what a semaphore counts.
pub const MAX_OPEN_CONNECTIONS: usize = 1 << 20;

fn default_max_open_connections() -> usize {
    10_000
}
fn default_max_buffer_bytes() -> usize {
    65_536
}
fn default_step() -> u64 {
    1_000
}
fn one() -> u64 {
    1
}
pub(crate) fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests;
