//! The TOML configuration.

use serde::Deserialize;

/// What `workerid-server` serves, from where.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The store, by URL as the `workerid` CLI takes it: `sqlite://...`,
    /// `postgres://...`, `mysql://...`, `redis://...` or `etcd://host:port,...`.
    #[serde(default = "default_store")]
    pub store: String,
    /// The address to listen on.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Tags created on start (when missing).
    #[serde(default = "default_tags")]
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

/// The snowflake worker's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnowflakeConfig {
    /// Whether to serve snowflake IDs.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The namespace its worker ID is leased in.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// The lease ttl, in seconds.
    #[serde(default = "default_ttl")]
    pub ttl_secs: u64,
}

impl Default for SnowflakeConfig {
    fn default() -> Self {
        SnowflakeConfig {
            enabled: true,
            namespace: default_namespace(),
            ttl_secs: default_ttl(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            store: default_store(),
            listen: default_listen(),
            tags: default_tags(),
            snowflake: SnowflakeConfig::default(),
            workers: None,
        }
    }
}

fn default_store() -> String {
    "sqlite://workerid.db?mode=rwc".into()
}
fn default_listen() -> String {
    "127.0.0.1:8880".into()
}
fn default_tags() -> Vec<TagConfig> {
    vec![TagConfig {
        name: "test".into(),
        first_id: 1,
        step: default_step(),
    }]
}
fn default_step() -> u64 {
    1_000
}
fn default_namespace() -> String {
    "workerid-server".into()
}
fn default_ttl() -> u64 {
    10
}
fn one() -> u64 {
    1
}
fn yes() -> bool {
    true
}
