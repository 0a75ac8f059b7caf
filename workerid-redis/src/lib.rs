//! # workerid-redis
//!
//! [`RedisStore`]: a [`LeaseStore`] on Redis, a single server or a Redis
//! Cluster. Every operation is **one Lua script call** (EVALSHA), atomic on the
//! server, with expiry judged on the server's clock (`TIME` inside the script),
//! never the client's.
//!
//! A namespace is two keys under the hash tag `{namespace}` (one cluster
//! slot): a hash with the pool size, a counter of IDs never granted (no
//! pre-filling of 2^bits entries) and each granted ID's holder, fence,
//! watermark and expiry (in ms), and each token's ID (so an acquire sent again
//! after its answer was lost finds its own grant); and a sorted set of the
//! IDs ever granted, ordered by the instant each is (or became) free. Acquire
//! looks at the head of the sorted set only: O(log n) in the pool size.
//! Acquire makes five or six `redis.call`s, renew and release four.
//!
//! ```no_run
//! # async fn demo() -> workerid_core::Result<()> {
//! use workerid_core::{Allocator, LeaseOptions};
//! use workerid_redis::RedisStore;
//!
//! let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! let allocator = Allocator::new(store, "mycluster", LeaseOptions::new().worker_bits(8))?;
//! let lease = allocator.acquire().await?;
//! # Ok(()) }
//! ```
//!
//! **Durability and failover.** Without `appendonly yes` + `appendfsync
//! always` a restart forgets every lease, fence and watermark (the store then
//! declares `durable = false`). Replication is asynchronous: a failover to a
//! replica can lose a grant that was acknowledged, and two processes can then
//! hold the same worker ID. Where that matters, have every write wait for
//! the replicas ([`RedisStoreBuilder::wait_for_replicas`], behind Sentinels
//! or on a Redis Cluster), or use a single durable server, or etcd or
//! PostgreSQL.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod builder;
mod connection;
mod keys;
mod listing;
mod script;
mod segments;
#[cfg(feature = "tls-rustls")]
mod tls;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::Value;
use workerid_core::{
    Capabilities, Error, Grant, Holder, LeaseStore, Listing, Namespace, Result, Token, WorkerId,
};

pub use builder::RedisStoreBuilder;
use connection::Connection;
use keys::keys;
pub use keys::DEFAULT_PREFIX;
use script::{ACQUIRE, EXTEND};

/// A lease store on Redis. Cheap to clone: clones share one multiplexed,
/// self-reconnecting connection.
///
/// Capabilities: 1 ms minimum ttl and granularity, 22 worker bits, durable
/// only as declared with [`RedisStoreBuilder::durable`], lists and
/// force-releases (one script each; a listing reads the whole namespace).
#[derive(Clone)]
pub struct RedisStore {
    connection: Connection,
    prefix: Arc<str>,
    durable: bool,
    /// Namespaces this process has added to the registry (see
    /// [`keys::registry`]).
    registered: Arc<std::sync::Mutex<std::collections::HashSet<Namespace>>>,
    /// Every write waits for this many replicas (`WAIT`).
    wait: Option<script::WaitForReplicas>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.connection {
            Connection::Single(_) => "single",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore")
            .field("connection", &kind)
            .field("prefix", &self.prefix)
            .field("durable", &self.durable)
            .field("wait_for_replicas", &self.wait.map(|w| w.replicas))
            .finish()
    }
}

impl RedisStore {
    /// Options: key prefix, durability, timeouts; then connect.
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder::default()
    }

    /// Connects to the server at `url` with the default options.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad URL; [`Error::Unavailable`] when the
    /// server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder().connect(url).await
    }

    /// Connects to a Redis Cluster with the default options.
    ///
    /// # Errors
    /// As [`RedisStore::connect`].
    pub async fn connect_cluster<S: AsRef<str>>(urls: &[S]) -> Result<Self> {
        Self::builder().connect_cluster(urls).await
    }

    async fn call(
        &self,
        script: &script::LuaScript,
        keys: &[String],
        args: &[String],
    ) -> Result<Value> {
        let mut connection = self.connection.clone();
        let Some(wait) = self.wait.filter(|_| script.writes) else {
            return script
                .call(&mut connection, keys, args)
                .await
                .map_err(|e| Error::unavailable("redis", e));
        };
        let (answer, acknowledged) = script
            .call_and_wait(&mut connection, keys, args, wait)
            .await
            .map_err(|e| Error::unavailable("redis", e))?;
        if acknowledged < i64::from(wait.replicas) {
            // Applied on the master, maybe lost in a failover: not an
            // answer to rely on. A caller that tries again is answered by
            // the write it made (an acquire sent again with its token).
            return Err(Error::unavailable(
                "redis",
                format!(
                    "the write reached {acknowledged} of the {} replicas asked for within {} ms",
                    wait.replicas, wait.timeout_ms
                ),
            ));
        }
        Ok(answer)
    }

    /// Renew (`ttl` in ms) or release (`ttl` empty): one `extend.lua` call,
    /// answered as the contract says.
    async fn extend(
        &self,
        what: &str,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: String,
        watermark: u64,
    ) -> Result<()> {
        let keys = keys(&self.prefix, namespace);
        let args = [
            id.to_string(),
            token.to_string(),
            ttl,
            watermark.to_string(),
        ];
        outcome(what, id, self.call(&EXTEND, &keys, &args).await?)
    }
}

/// A ttl in milliseconds, the store's granularity (the allocator rejects
/// any other ttl), rounded up so that a lease never ends early.
fn millis(ttl: Duration) -> String {
    ttl.as_micros().div_ceil(1000).to_string()
}

/// `Unavailable` for an answer a script cannot have given to `what`, as a
/// lease or a segment error: its shape, numbers shown, no text (a text
/// may be a lease token).
pub(crate) fn nonsense<E: From<Error>>(what: &str, answer: &Value) -> E {
    Error::unavailable(
        "redis",
        format!("unexpected answer to {what}: {}", shape(answer)),
    )
    .into()
}

/// `value` with its numbers and the length of its texts, not their bytes.
fn shape(value: &Value) -> String {
    match value {
        Value::Nil => "nil".into(),
        Value::Int(n) => n.to_string(),
        Value::BulkString(bytes) => format!("<{} bytes>", bytes.len()),
        Value::SimpleString(text) => format!("<{} bytes>", text.len()),
        Value::Okay => "OK".into(),
        Value::Array(items) | Value::Set(items) => {
            let items: Vec<String> = items.iter().map(shape).collect();
            format!("[{}]", items.join(", "))
        }
        Value::ServerError(e) => format!("error {:?}", e.code()),
        _ => "<another kind of answer>".into(),
    }
}

pub(crate) fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

/// Maps a renew or release answer to the contract's outcome.
fn outcome(what: &str, id: WorkerId, answer: Value) -> Result<()> {
    match text(&answer) {
        Some("ok") => Ok(()),
        Some("not_assigned") => Err(Error::NotAssigned { id }),
        Some("mismatch") => Err(Error::TokenMismatch { id }),
        Some("expired") => Err(Error::TokenExpired { id }),
        _ => Err(nonsense(what, &answer)),
    }
}

#[async_trait]
impl LeaseStore for RedisStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            durable: self.durable,
            list: true,
            ..Capabilities::default()
        }
    }

    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        self.register(namespace).await?;
        let keys = keys(&self.prefix, namespace);
        let args = [
            max_worker_id.to_string(),
            token.to_string(),
            millis(ttl),
            holder.to_string(),
        ];
        let answer = self.call(&ACQUIRE, &keys, &args).await?;
        let parts = match &answer {
            Value::Array(parts) => parts.as_slice(),
            _ => return Err(nonsense("acquire", &answer)),
        };
        match parts {
            [status, id, Value::Int(fence), watermark, created @ ..]
                if text(status) == Some("ok") =>
            {
                // A namespace made anew (the first grant ever, or the first
                // after a restart that forgot it) goes into the registry
                // whatever this process did before.
                if created.first().and_then(text) == Some("new") {
                    if let Err(e) = self.add_to_registry(namespace).await {
                        tracing::warn!("namespace {namespace} may be missing from listings: {e}");
                    }
                }
                let id = text(id).and_then(|s| s.parse::<u32>().ok());
                let watermark = text(watermark).and_then(|s| s.parse::<u64>().ok());
                match (id, watermark, u64::try_from(*fence)) {
                    (Some(id), Some(previous_watermark), Ok(fence)) => Ok(Grant {
                        id: WorkerId::from(id),
                        fence,
                        previous_watermark,
                    }),
                    _ => Err(nonsense("acquire", &answer)),
                }
            }
            [status] if text(status) == Some("full") => Err(Error::NoAvailableId { max_worker_id }),
            [status, stored] if text(status) == Some("mismatch") => {
                match text(stored).and_then(|s| s.parse().ok()) {
                    Some(stored) => Err(Error::ConfigMismatch {
                        namespace: namespace.to_string(),
                        stored,
                        requested: max_worker_id,
                    }),
                    None => Err(nonsense("acquire", &answer)),
                }
            }
            _ => Err(nonsense("acquire", &answer)),
        }
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        self.extend("renew", namespace, id, token, millis(ttl), watermark)
            .await
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        self.extend("release", namespace, id, token, String::new(), watermark)
            .await
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        self.list_namespace(namespace).await
    }

    async fn list_namespaces(&self) -> Result<Vec<workerid_core::NamespaceInfo>> {
        self.namespaces().await
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        self.force_release_id(namespace, id).await
    }

    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        self.remove_namespace_keys(namespace).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unexpected_answer_shows_its_shape_not_its_texts() {
        let answer = Value::Array(vec![
            Value::Int(1),
            Value::BulkString(b"Zx9_token_of_someone22".to_vec()),
            Value::Nil,
            Value::Array(vec![Value::SimpleString("holder-a".into())]),
        ]);
        let error: Error = nonsense("acquire", &answer);
        let shown = error.to_string();
        assert!(
            shown.contains("[1, <22 bytes>, nil, [<8 bytes>]]"),
            "{shown}"
        );
        assert!(
            !shown.contains("token") && !shown.contains("holder"),
            "{shown}"
        );
    }
}
