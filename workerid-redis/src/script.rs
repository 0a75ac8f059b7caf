//! The Lua scripts, and calling one in a single round trip.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{cmd, ErrorKind, RedisResult, ServerErrorKind, Value};

/// A Lua script with its SHA1, called with EVALSHA.
pub(crate) struct LuaScript {
    source: &'static str,
    sha: String,
}

impl LuaScript {
    fn new(source: &'static str) -> Self {
        let sha = redis::Script::new(source).get_hash().to_string();
        LuaScript { source, sha }
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
    LazyLock::new(|| LuaScript::new(include_str!("lua/list.lua")));
pub(crate) static NAMESPACE_INFO: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("lua/namespace_info.lua")));
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
    LazyLock::new(|| LuaScript::new(include_str!("lua/segment_list.lua")));
