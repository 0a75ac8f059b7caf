//! Opening Redis, Redis Cluster, and Redis behind Sentinels.

use std::sync::Arc;

use super::tls_files::TlsFiles;
use super::{connect_error, Opened};
use crate::store_url::{encode_user_info, StoreUrl};
use crate::{OpenError, OpenOptions, StoreKind};

/// `user:password@`, encoded, or nothing.
fn user_info(url: &StoreUrl) -> String {
    match (&url.user, &url.password) {
        (None, None) => String::new(),
        (user, password) => {
            let user = user.as_deref().map(encode_user_info).unwrap_or_default();
            match password {
                Some(password) => format!("{user}:{}@", encode_user_info(password)),
                None => format!("{user}@"),
            }
        }
    }
}

pub(crate) async fn open(options: &OpenOptions, url: &StoreUrl) -> Result<Opened, OpenError> {
    url.check_params(&[
        "prefix",
        "durable",
        "cacert",
        "cert",
        "key",
        "protocol",
        "wait_replicas",
    ])?;
    let tls = TlsFiles::read(url)?;
    let mut builder = workerid_redis::RedisStore::builder().durable(url.flag("durable")?);
    if let Some(replicas) = url.param("wait_replicas") {
        let replicas = replicas.parse().map_err(|_| {
            url.bad(format!(
                "wait_replicas={replicas:?} is not a number of replicas"
            ))
        })?;
        builder = builder.wait_for_replicas(replicas);
    }
    if let Some(prefix) = url.param("prefix") {
        builder = builder.key_prefix(prefix);
    }
    if let Some(timeout) = options.connect_timeout {
        builder = builder.connection_timeout(timeout);
    }
    if let Some(timeout) = options.request_timeout {
        builder = builder.response_timeout(timeout);
    }
    builder = tls.apply(builder);
    let scheme = if url.tls { "rediss" } else { "redis" };
    let auth = user_info(url);
    let store = if url.kind == StoreKind::Redis {
        let [host] = url.hosts.as_slice() else {
            return Err(url.bad("one host; for a Redis Cluster use redis+cluster://"));
        };
        let mut single = format!("{scheme}://{auth}{host}/{}", url.path);
        if let Some(protocol) = url.param("protocol") {
            single.push_str("?protocol=");
            single.push_str(protocol);
        }
        builder.connect(&single).await
    } else if url.kind == StoreKind::RedisSentinel {
        // MASTER or MASTER/DB.
        let (master, db) = match url.path.split_once('/') {
            Some((master, db)) => (master, db),
            None => (url.path.as_str(), ""),
        };
        if master.is_empty() {
            return Err(url.bad("the master's name after the Sentinels' addresses"));
        }
        let sentinels: Vec<String> = url
            .hosts
            .iter()
            .map(|host| format!("redis://{auth}{host}/{db}"))
            .collect();
        builder.connect_sentinel(&sentinels, master).await
    } else {
        if !url.path.is_empty() {
            return Err(url.bad("a Redis Cluster has no database number"));
        }
        let nodes: Vec<String> = url
            .hosts
            .iter()
            .map(|host| format!("{scheme}://{auth}{host}/"))
            .collect();
        builder.connect_cluster(&nodes).await
    };
    Ok(Arc::new(store.map_err(|e| connect_error(url, e))?))
}
