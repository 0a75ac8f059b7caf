//! The `[snowflake]` table: the worker's lease and its IDs' layout.

use std::time::Duration;

use serde::Deserialize;
use workerid::snowflake::Layout;

use super::yes;

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
    /// The label stored with the lease, shown by `workerid leases` and in
    /// the `workerid_lease_info` metric (default: the `WORKERID_HOLDER`
    /// environment variable, else host name and process ID). 1 to 128
    /// characters of `[A-Za-z0-9._:/-]`.
    #[serde(default)]
    pub holder: Option<String>,
    /// The lease ttl, in seconds: 1 to [`MAX_TTL_SECS`](super::MAX_TTL_SECS), and at least the
    /// store's minimum.
    #[serde(default = "default_ttl")]
    pub ttl_secs: u64,
    /// The layout of the IDs, one of `Layout::PRESETS` (default
    /// `classic`; `twitter` is Leaf's).
    #[serde(default = "default_layout")]
    pub layout: String,
    /// The largest worker ID of the pool (default: the layout's largest,
    /// at most 1023).
    #[serde(default)]
    pub max_worker_id: Option<u32>,
    /// How often the lease is renewed, in milliseconds (default ttl/3).
    #[serde(default)]
    pub renew_every_ms: Option<u64>,
    /// How long one lease call may take, in milliseconds (default half the
    /// renewal period); it must be shorter than the renewal period, or one
    /// hung call could outlast the next renewal.
    #[serde(default)]
    pub renew_timeout_ms: Option<u64>,
}

impl SnowflakeConfig {
    /// The holder label: `holder`, else `WORKERID_HOLDER`, else host name
    /// and process ID.
    ///
    /// # Errors
    /// A message naming `snowflake.holder` or `WORKERID_HOLDER` when the
    /// label is not valid.
    pub fn holder(&self) -> Result<workerid::Holder, String> {
        match &self.holder {
            Some(label) => {
                workerid::Holder::new(label.as_str()).map_err(|e| format!("snowflake.holder: {e}"))
            }
            None => workerid::Holder::from_env().map_err(|e| format!("snowflake: {e}")),
        }
    }

    /// The layout named by `layout`.
    ///
    /// # Errors
    /// A message naming the presets when `layout` is none of them.
    pub fn layout(&self) -> Result<Layout, String> {
        Layout::preset(&self.layout).ok_or_else(|| {
            format!(
                "snowflake.layout {:?} is not one of {}",
                self.layout,
                Layout::PRESETS.join(", ")
            )
        })
    }

    /// The largest worker ID of the pool: `max_worker_id`, else the
    /// layout's largest, at most 1023.
    pub fn max_worker_id(&self, layout: &Layout) -> u32 {
        self.max_worker_id
            .unwrap_or_else(|| layout.max_worker_id().min(1023))
    }

    /// The lease ttl.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_secs)
    }
    /// The renewal period.
    pub fn renew_every(&self) -> Duration {
        self.renew_every_ms
            .map_or(self.ttl() / 3, Duration::from_millis)
    }
    /// The timeout of one lease call.
    pub fn renew_timeout(&self) -> Duration {
        self.renew_timeout_ms
            .map_or(self.renew_every() / 2, Duration::from_millis)
    }
}

impl Default for SnowflakeConfig {
    fn default() -> Self {
        SnowflakeConfig {
            enabled: true,
            namespace: default_namespace(),
            holder: None,
            ttl_secs: default_ttl(),
            layout: default_layout(),
            max_worker_id: None,
            renew_every_ms: None,
            renew_timeout_ms: None,
        }
    }
}

fn default_namespace() -> String {
    "workerid-server".into()
}
fn default_layout() -> String {
    "classic".into()
}
fn default_ttl() -> u64 {
    10
}
