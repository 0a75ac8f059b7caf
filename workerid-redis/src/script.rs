//! The Lua scripts, and calling one in a single round trip.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{cmd, ErrorKind, RedisResult, ServerErrorKind, Value};

/// A Lua script with its SHA1, called with EVALSHA.
pub(crate) struct LuaScript {
    source: &'static str,
    sha: String,
    /// Whether it may write (then its call waits for replicas, if asked).
    pub(crate) writes: bool,
}

/// `WAIT` after a write: for this many replicas, at most this many ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitForReplicas {
    pub(crate) replicas: u32,
    pub(crate) timeout_ms: u64,
}

impl LuaScript {
    fn new(source: &'static str) -> Self {
        Self::with(source, true)
    }

    fn read_only(source: &'static str) -> Self {
        Self::with(source, false)
    }

    fn with(source: &'static str, writes: bool) -> Self {
        let sha = redis::Script::new(source).get_hash().to_string();
        LuaScript {
            source,
            sha,
            writes,
        }
    }

    /// As [`call`](Self::call), then `WAIT` in the same round trip on the
    /// same connection: the answer, and how many replicas acknowledged the
    /// write (and every write sent on the connection before it).
    ///
    /// On a cluster connection, redis-rs sends a pipeline whole to the
    /// master of its first keyed command's slot (`WAIT` has no key and
    /// does not change the route), and whole again after a `MOVED` or a
    /// lost connection; so `WAIT` always follows the script to the node
    /// that ran it, on that node's connection.
    pub(crate) async fn call_and_wait<C: ConnectionLike>(
        &self,
        connection: &mut C,
        keys: &[String],
        args: &[String],
        wait: WaitForReplicas,
    ) -> RedisResult<(Value, i64)> {
        let pipeline = |first: redis::Cmd| {
            let mut pipe = redis::pipe();
            pipe.add_command(first).add_command(
                cmd("WAIT")
                    .arg(wait.replicas)
                    .arg(wait.timeout_ms)
                    .to_owned(),
            );
            pipe
        };
        let mut evalsha = cmd("EVALSHA");
        evalsha.arg(&self.sha).arg(keys.len()).arg(keys).arg(args);
        match pipeline(evalsha).query_async(connection).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                tracing::debug!("script not cached on the server: sending it with EVAL");
                let mut eval = cmd("EVAL");
                eval.arg(self.source).arg(keys.len()).arg(keys).arg(args);
                pipeline(eval).query_async(connection).await
            }
            answer => answer,
        }
    }

    /// EVALSHA; on NOSCRIPT (a server that has not seen the script since it
    /// started), EVAL, which also caches it. EVAL is routed by key like
    /// EVALSHA, so on a cluster the script reaches the node that owns the
    /// namespace's slot. One round trip once the script is cached.
    pub(crate) async fn call<C: ConnectionLike>(
        &self,
        connection: &mut C,
        keys: &[String],
        args: &[String],
    ) -> RedisResult<Value> {
        let mut evalsha = cmd("EVALSHA");
        evalsha.arg(&self.sha).arg(keys.len()).arg(keys).arg(args);
        match evalsha.query_async(connection).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                tracing::debug!("script not cached on the server: sending it with EVAL");
                let mut eval = cmd("EVAL");
                eval.arg(self.source).arg(keys.len()).arg(keys).arg(args);
                eval.query_async(connection).await
            }
            answer => answer,
        }
    }
}

pub(crate) static ACQUIRE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/acquire.lua")));
/// Renew and release (an empty ttl).
pub(crate) static EXTEND: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/extend.lua")));

pub(crate) static LIST: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(include_str!("lua/list.lua")));
pub(crate) static NAMESPACE_INFO: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(include_str!("lua/namespace_info.lua")));
pub(crate) static FORCE_RELEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/force_release.lua")));
pub(crate) static REMOVE_NAMESPACE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/remove_namespace.lua")));

pub(crate) static SEGMENT_CREATE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/segment_create.lua")));
pub(crate) static SEGMENT_RESERVE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/segment_reserve.lua")));
pub(crate) static SEGMENT_GIVE_BACK: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/segment_give_back.lua")));
pub(crate) static SEGMENT_LIST: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::read_only(include_str!("lua/segment_list.lua")));
