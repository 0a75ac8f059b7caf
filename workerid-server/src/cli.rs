//! The command line: every setting as a flag and an environment variable,
//! over the TOML file's values.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::auth::BearerTokens;
use crate::config::Config;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colour only on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// An HTTP ID service: go-id-alloc's and Leaf's APIs, segment and snowflake
/// IDs from one store. Flags and environment variables override the
/// config file.
// No `Debug`: the store URL and the token may hold secrets.
#[derive(Parser)]
#[command(name = "workerid-server", version, about)]
pub struct Cli {
    /// Print the shell completion script for SHELL and exit.
    #[arg(long, value_name = "SHELL")]
    pub completions: Option<clap_complete::Shell>,
    /// A TOML config file (tags are set there only).
    #[arg(long, env = "WORKERID_CONFIG")]
    pub config: Option<PathBuf>,
    /// The store URL: sqlite://, postgres://, mysql://, redis://, etcd://...
    #[arg(long, env = "WORKERID_STORE", hide_env_values = true)]
    pub store: Option<String>,
    /// The address to listen on (default 127.0.0.1:8880).
    #[arg(long, env = "WORKERID_LISTEN")]
    pub listen: Option<String>,
    /// Threads serving requests, 1 to 1024 (default: one per CPU).
    #[arg(long, env = "WORKERID_WORKERS")]
    pub workers: Option<usize>,
    /// A bearer token every request must carry (`Authorization: Bearer
    /// ...`); given more than once, any of them, to rotate tokens (the
    /// variable holds one).
    #[arg(long, env = "WORKERID_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Vec<String>,
    /// The bearer token gRPC's operator calls must carry (ForceRelease,
    /// RemoveNamespace, CreateTag); more than one as for --auth-token.
    #[arg(long, env = "WORKERID_OPERATOR_TOKEN", hide_env_values = true)]
    pub operator_token: Vec<String>,
    /// The secret gRPC give-back receipts are signed with, shared by the
    /// servers of one store (at least 16 bytes).
    #[arg(long, env = "WORKERID_GIVE_BACK_KEY", hide_env_values = true)]
    pub give_back_key: Option<String>,
    /// Log lines as text or JSON.
    #[arg(long, env = "WORKERID_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Timeout of one segment store call, ms.
    #[arg(long, env = "WORKERID_STORE_TIMEOUT_MS")]
    pub store_timeout_ms: Option<u64>,
    /// How often the tag list is reread, ms.
    #[arg(long, env = "WORKERID_TAGS_REFRESH_MS")]
    pub tags_refresh_ms: Option<u64>,
    /// Serve segments from a store that is not durable (true/false).
    #[arg(long, env = "WORKERID_ALLOW_VOLATILE_SEGMENTS")]
    pub allow_volatile_segments: Option<bool>,
    /// Answer /alloc on the fast path (true/false).
    #[arg(long, env = "WORKERID_FAST_PATH")]
    pub fast_path: Option<bool>,
    /// How long a keep-alive connection may sit idle, ms.
    #[arg(long, env = "WORKERID_IDLE_TIMEOUT_MS")]
    pub idle_timeout_ms: Option<u64>,
    /// The most connections open at once.
    #[arg(long, env = "WORKERID_MAX_OPEN_CONNECTIONS")]
    pub max_open_connections: Option<usize>,
    /// The most bytes buffered per connection.
    #[arg(long, env = "WORKERID_MAX_BUFFER_BYTES")]
    pub max_buffer_bytes: Option<usize>,
    /// Serve the gRPC API on this address (a port of its own).
    #[arg(long, env = "WORKERID_GRPC_LISTEN")]
    pub grpc_listen: Option<String>,
    /// Ping a gRPC connection silent this long, and close it when the ping
    /// goes unanswered as long, ms.
    #[arg(long, env = "WORKERID_GRPC_KEEPALIVE_MS")]
    pub grpc_keepalive_ms: Option<u64>,
    /// TLS on the gRPC port: the certificate chain (PEM file).
    #[arg(long, env = "WORKERID_GRPC_TLS_CERT")]
    pub grpc_tls_cert: Option<std::path::PathBuf>,
    /// TLS on the gRPC port: the private key (PEM file).
    #[arg(long, env = "WORKERID_GRPC_TLS_KEY")]
    pub grpc_tls_key: Option<std::path::PathBuf>,
    /// Only gRPC clients with a certificate this CA (PEM file) signed.
    #[arg(long, env = "WORKERID_GRPC_TLS_CLIENT_CA")]
    pub grpc_tls_client_ca: Option<std::path::PathBuf>,
    /// The most IDs one request may ask for with `count`.
    #[arg(long, env = "WORKERID_MAX_BATCH")]
    pub max_batch: Option<u64>,
    /// Export traces over OTLP/gRPC to this endpoint (`http://host:4317`).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", hide_env_values = true)]
    pub otlp_endpoint: Option<String>,
    /// Serve snowflake IDs (true/false).
    #[arg(long, env = "WORKERID_SNOWFLAKE_ENABLED")]
    pub snowflake_enabled: Option<bool>,
    /// The namespace the snowflake worker ID is leased in.
    #[arg(long, env = "WORKERID_SNOWFLAKE_NAMESPACE")]
    pub snowflake_namespace: Option<String>,
    /// The label stored with the snowflake lease, shown to operators
    /// (default: host name and process ID).
    #[arg(long, env = "WORKERID_HOLDER")]
    pub snowflake_holder: Option<String>,
    /// The lease ttl, s (1 to 86400).
    #[arg(long, env = "WORKERID_SNOWFLAKE_TTL_SECS")]
    pub snowflake_ttl_secs: Option<u64>,
    /// The layout of the IDs: classic, twitter (Leaf's), sonyflake,
    /// sonyflake-v2, discord, instagram or js-safe.
    #[arg(long, env = "WORKERID_SNOWFLAKE_LAYOUT")]
    pub snowflake_layout: Option<String>,
    /// The largest worker ID of the pool.
    #[arg(long, env = "WORKERID_SNOWFLAKE_MAX_WORKER_ID")]
    pub snowflake_max_worker_id: Option<u32>,
    /// How often the lease is renewed, ms.
    #[arg(long, env = "WORKERID_SNOWFLAKE_RENEW_EVERY_MS")]
    pub snowflake_renew_every_ms: Option<u64>,
    /// Timeout of one lease call, ms (shorter than the renewal period).
    #[arg(long, env = "WORKERID_SNOWFLAKE_RENEW_TIMEOUT_MS")]
    pub snowflake_renew_timeout_ms: Option<u64>,
}

impl Cli {
    /// The config file's values (or the defaults) with the flags and
    /// environment variables over them, checked.
    ///
    /// # Errors
    /// An unreadable or bad file, or a bad value.
    pub fn config(&self) -> Result<Config, String> {
        let mut config = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                toml::from_str(&text).map_err(|e| bad_config(path, &text, &e))?
            }
            None => Config::default(),
        };
        fn set<T: Clone>(to: &mut T, from: &Option<T>) {
            if let Some(value) = from {
                *to = value.clone();
            }
        }
        fn set_some<T: Clone>(to: &mut Option<T>, from: &Option<T>) {
            if from.is_some() {
                to.clone_from(from);
            }
        }
        set(&mut config.store, &self.store);
        set(&mut config.listen, &self.listen);
        set_some(&mut config.workers, &self.workers);
        // Tokens given here replace the file's, as every other setting does.
        for (to, from) in [
            (&mut config.auth_token, &self.auth_token),
            (&mut config.operator_token, &self.operator_token),
        ] {
            if !from.is_empty() {
                *to = BearerTokens::new(from.clone());
            }
        }
        set_some(&mut config.give_back_key, &self.give_back_key);
        set(&mut config.store_timeout_ms, &self.store_timeout_ms);
        set(&mut config.tags_refresh_ms, &self.tags_refresh_ms);
        set(
            &mut config.allow_volatile_segments,
            &self.allow_volatile_segments,
        );
        set(&mut config.fast_path, &self.fast_path);
        set(&mut config.idle_timeout_ms, &self.idle_timeout_ms);
        set(&mut config.max_open_connections, &self.max_open_connections);
        set(&mut config.max_buffer_bytes, &self.max_buffer_bytes);
        set(&mut config.max_batch, &self.max_batch);
        set_some(&mut config.grpc_listen, &self.grpc_listen);
        set_some(&mut config.grpc_tls_cert, &self.grpc_tls_cert);
        set_some(&mut config.grpc_tls_key, &self.grpc_tls_key);
        set_some(&mut config.grpc_tls_client_ca, &self.grpc_tls_client_ca);
        set(&mut config.grpc_keepalive_ms, &self.grpc_keepalive_ms);
        set_some(&mut config.otlp_endpoint, &self.otlp_endpoint);
        let s = &mut config.snowflake;
        set(&mut s.enabled, &self.snowflake_enabled);
        set(&mut s.namespace, &self.snowflake_namespace);
        set_some(&mut s.holder, &self.snowflake_holder);
        set(&mut s.ttl_secs, &self.snowflake_ttl_secs);
        set(&mut s.layout, &self.snowflake_layout);
        set_some(&mut s.max_worker_id, &self.snowflake_max_worker_id);
        set_some(&mut s.renew_every_ms, &self.snowflake_renew_every_ms);
        set_some(&mut s.renew_timeout_ms, &self.snowflake_renew_timeout_ms);
        config.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }
}

/// A config file's error without the quoted source line that `toml`'s
/// message carries: that line may hold the store's password or the token.
/// On the line of a secret setting, the values the message quotes are
/// hidden too (a token written as a number is quoted back as one).
fn bad_config(path: &std::path::Path, text: &str, e: &toml::de::Error) -> String {
    let Some(start) = e.span().map(|span| span.start.min(text.len())) else {
        return format!("bad config {}: {}", path.display(), e.message());
    };
    let line = text[..start].matches('\n').count() + 1;
    let line_start = text[..start].rfind('\n').map_or(0, |at| at + 1);
    let key = text[line_start..]
        .trim_start()
        .split(|c: char| c == '=' || c.is_whitespace())
        .next()
        .unwrap_or("");
    let message = if SECRET_SETTINGS.contains(&key.trim_matches('"')) {
        hide_quoted(e.message())
    } else {
        e.message().to_string()
    };
    format!("bad config {}, line {line}: {message}", path.display())
}

/// The settings whose values are secret, or may hold one (the store URL's
/// password).
const SECRET_SETTINGS: [&str; 4] = ["store", "auth_token", "operator_token", "give_back_key"];

/// `message` with what it quotes between backticks replaced by `…`.
fn hide_quoted(message: &str) -> String {
    message
        .split('`')
        .enumerate()
        .map(|(i, part)| if i % 2 == 1 { "…" } else { part })
        .collect::<Vec<_>>()
        .join("`")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> String {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Secrets {
            store: Option<String>,
            auth_token: Option<String>,
            give_back_key: Option<String>,
            listen: Option<String>,
        }
        let e = toml::from_str::<Secrets>(text).expect_err(text);
        bad_config(std::path::Path::new("f.toml"), text, &e)
    }

    #[test]
    fn a_secret_setting_of_the_wrong_type_is_not_quoted_back() {
        for text in [
            "auth_token = 987654321",
            "listen = \"x\"\ngive_back_key = 987654321",
            "  store = 987654321.5",
            "\"auth_token\" = 987654321",
        ] {
            let shown = error_of(text);
            assert!(!shown.contains("987654321"), "{text}: {shown}");
            assert!(shown.contains("expected a string"), "{text}: {shown}");
        }
        let other = error_of("listen = 987654321");
        assert!(other.contains("987654321"), "{other}");
    }
}
