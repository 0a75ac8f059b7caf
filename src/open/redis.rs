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

/// The database number `path` (decoded) names, as the driver's URL takes
/// it: empty for the default, else plain decimal digits. Anything else would
/// be pasted into that URL as more than a number (`0%23insecure` decodes to
/// a `#insecure` fragment, which turns off certificate checks).
fn db_number(url: &StoreUrl, path: &str) -> Result<String, OpenError> {
    if path.is_empty() {
        return Ok(String::new());
    }
    match path.parse::<u32>() {
        Ok(db) if path.bytes().all(|b| b.is_ascii_digit()) => Ok(db.to_string()),
        _ => Err(url.bad(format!("the path must be a database number, not {path:?}"))),
    }
}

/// The driver's name for `protocol=` (`2`, `resp2`, `3`, `resp3`).
fn protocol_version(url: &StoreUrl, protocol: &str) -> Result<&'static str, OpenError> {
    match protocol {
        "2" | "resp2" => Ok("resp2"),
        "3" | "resp3" => Ok("resp3"),
        other => Err(url.bad(format!("protocol={other:?} is not 2, resp2, 3 or resp3"))),
    }
}

/// Where the driver connects, by the URLs it takes.
enum Target {
    /// One server.
    Single(String),
    /// The Sentinels, and the name of the master they watch.
    Sentinel(Vec<String>, String),
    /// The nodes of a cluster.
    Cluster(Vec<String>),
}

/// The driver's URLs for `url`, checked before anything is read or
/// connected.
fn target(url: &StoreUrl) -> Result<Target, OpenError> {
    let protocol = url
        .param("protocol")
        .map(|protocol| protocol_version(url, protocol))
        .transpose()?;
    let scheme = if url.tls { "rediss" } else { "redis" };
    let auth = user_info(url);
    match url.kind {
        StoreKind::Redis => {
            let [host] = url.hosts.as_slice() else {
                return Err(url.bad("one host; for a Redis Cluster use redis+cluster://"));
            };
            let mut single = format!("{scheme}://{auth}{host}/{}", db_number(url, &url.path)?);
            if let Some(protocol) = protocol {
                single.push_str("?protocol=");
                single.push_str(protocol);
            }
            Ok(Target::Single(single))
        }
        StoreKind::RedisSentinel => {
            // MASTER or MASTER/DB.
            let (master, db) = match url.path.split_once('/') {
                Some((master, db)) => (master, db),
                None => (url.path.as_str(), ""),
            };
            if master.is_empty() {
                return Err(url.bad("the master's name after the Sentinels' addresses"));
            }
            let db = db_number(url, db)?;
            let sentinels = url
                .hosts
                .iter()
                .map(|host| format!("redis://{auth}{host}/{db}"))
                .collect();
            Ok(Target::Sentinel(sentinels, master.to_string()))
        }
        _ => {
            if !url.path.is_empty() {
                return Err(url.bad("a Redis Cluster has no database number"));
            }
            let nodes = url
                .hosts
                .iter()
                .map(|host| format!("{scheme}://{auth}{host}/"))
                .collect();
            Ok(Target::Cluster(nodes))
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
    let target = target(url)?;
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
        builder = builder.connect_timeout(timeout);
    }
    if let Some(timeout) = options.request_timeout {
        builder = builder.request_timeout(timeout);
    }
    builder = tls.apply(builder);
    let store = match target {
        Target::Single(single) => builder.connect(&single).await,
        Target::Sentinel(sentinels, master) => builder.connect_sentinel(&sentinels, &master).await,
        Target::Cluster(nodes) => builder.connect_cluster(&nodes).await,
    };
    Ok(Arc::new(store.map_err(|e| connect_error(url, e))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver_url(raw: &str) -> Result<String, OpenError> {
        let url = StoreUrl::parse(raw)?;
        match target(&url)? {
            Target::Single(single) => Ok(single),
            Target::Sentinel(sentinels, master) => Ok(format!("{} {master}", sentinels.join(","))),
            Target::Cluster(nodes) => Ok(nodes.join(",")),
        }
    }

    #[test]
    fn the_database_is_a_plain_number_and_the_protocol_a_known_one() {
        for (raw, expected) in [
            ("redis://h:1", "redis://h:1/"),
            ("redis://h:1/", "redis://h:1/"),
            ("rediss://:pw@h:1/%31%35", "rediss://:pw@h:1/15"),
            ("redis://h:1/007?protocol=3", "redis://h:1/7?protocol=resp3"),
            (
                "redis://h:1/2?protocol=resp2",
                "redis://h:1/2?protocol=resp2",
            ),
            (
                "redis+sentinel://a:1,b:2/mymaster/3",
                "redis://a:1/3,redis://b:2/3 mymaster",
            ),
        ] {
            assert_eq!(driver_url(raw).expect(raw), expected, "{raw}");
        }
    }

    #[test]
    fn anything_else_in_the_database_or_protocol_is_a_bad_url() {
        for raw in [
            "rediss://127.0.0.1:1/0%23insecure",
            "rediss://127.0.0.1:1/0%3Fprotocol=3",
            "redis://127.0.0.1:1/0%2F1",
            "redis://127.0.0.1:1/-1",
            "redis://127.0.0.1:1/+1",
            "redis://127.0.0.1:1/%200",
            "redis://127.0.0.1:1/99999999999",
            "redis://127.0.0.1:1/x",
            "rediss://127.0.0.1:1/0?protocol=3%23insecure",
            "rediss://127.0.0.1:1/0?protocol=3%26db=2",
            "redis://127.0.0.1:1/0?protocol=4",
            "redis+sentinel://a:1/m/0%23insecure",
            "redis+sentinel://a:1/m/0?protocol=resp3%23insecure",
        ] {
            assert!(
                matches!(driver_url(raw), Err(OpenError::BadUrl { .. })),
                "{raw}: {:?}",
                driver_url(raw)
            );
        }
    }
}
