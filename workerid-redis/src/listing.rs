//! The operator's methods: list a namespace, force a release. One script each.

use std::time::Duration;

use redis::Value;
use workerid_core::{
    Error, Holder, LeaseInfo, LeaseState, Listing, Namespace, NamespaceInfo, Result, WorkerId,
};

use crate::keys::{keys, registry};
use crate::script::{FORCE_RELEASE, LIST, NAMESPACE_INFO, REMOVE_NAMESPACE};
use crate::{nonsense, text, RedisStore};

fn number<T: std::str::FromStr>(value: &Value) -> Option<T> {
    text(value).and_then(|s| s.parse().ok())
}

/// Reads `{'ok', max, now, (id, ends, fence, watermark, holder)*}` or `{'unknown'}`.
fn parse_listing(answer: &Value) -> Option<Listing> {
    let Value::Array(parts) = answer else {
        return None;
    };
    match parts.as_slice() {
        [status] if text(status) == Some("unknown") => Some(Listing::unknown()),
        [status, max, seconds, micros, entries @ ..] if text(status) == Some("ok") => {
            let now = Duration::from_secs(number(seconds)?)
                .checked_add(Duration::from_micros(number(micros)?))?;
            let mut leases = entries
                .chunks(5)
                .map(|entry| match entry {
                    [id, ends, fence, watermark, holder] => {
                        let ends: u64 = number(ends)?;
                        Some(LeaseInfo {
                            id: WorkerId::from(number::<u32>(id)?),
                            state: LeaseState::judge(ends != 0, Duration::from_millis(ends), now),
                            fence: number(fence)?,
                            watermark: number(watermark)?,
                            holder: Holder::new(text(holder)?).ok()?,
                        })
                    }
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            leases.sort_unstable_by_key(|l| l.id);
            Some(Listing {
                max_worker_id: Some(number(max)?),
                leases,
            })
        }
        _ => None,
    }
}

impl RedisStore {
    /// Adds `namespace` to the registry once per process, before the first
    /// acquire in it: a namespace with a grant is always listed.
    pub(crate) async fn register(&self, namespace: &Namespace) -> Result<()> {
        let known = self
            .registered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(namespace);
        if known {
            return Ok(());
        }
        self.add_to_registry(namespace).await
    }

    /// Adds `namespace` to the registry (one `SADD`) and remembers it.
    pub(crate) async fn add_to_registry(&self, namespace: &Namespace) -> Result<()> {
        self.registry_update(namespace, true).await
    }

    /// Adds (`SADD`) or removes (`SREM`) `namespace` in the registry, and
    /// the same in this process's record of the namespaces it registered.
    async fn registry_update(&self, namespace: &Namespace, add: bool) -> Result<()> {
        let mut connection = self.connection.clone();
        redis::cmd(if add { "SADD" } else { "SREM" })
            .arg(registry(&self.prefix))
            .arg(namespace.as_str())
            .query_async::<i64>(&mut connection)
            .await
            .map_err(|e| Error::unavailable("redis", e))?;
        let mut registered = self
            .registered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if add {
            registered.insert(namespace.clone());
        } else {
            registered.remove(namespace);
        }
        Ok(())
    }

    pub(crate) async fn namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        let mut connection = self.connection.clone();
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(registry(&self.prefix))
            .query_async(&mut connection)
            .await
            .map_err(|e| Error::unavailable("redis", e))?;
        names.sort_unstable();
        let mut all = Vec::with_capacity(names.len());
        for name in names {
            let Ok(namespace) = Namespace::new(name.as_str()) else {
                return Err(nonsense("list_namespaces", &Value::SimpleString(name)));
            };
            let answer = self
                .call(&NAMESPACE_INFO, &keys(&self.prefix, &namespace), &[])
                .await?;
            let parts = match &answer {
                Value::Array(parts) => parts.as_slice(),
                _ => return Err(nonsense("list_namespaces", &answer)),
            };
            match parts {
                // Registered, but its first acquire never ran.
                [Value::Nil] => {}
                [max, Value::Int(live)] => {
                    let (Some(max_worker_id), Ok(live)) = (number(max), u32::try_from(*live))
                    else {
                        return Err(nonsense("list_namespaces", &answer));
                    };
                    all.push(NamespaceInfo {
                        namespace,
                        max_worker_id,
                        live,
                    });
                }
                _ => return Err(nonsense("list_namespaces", &answer)),
            }
        }
        Ok(all)
    }

    pub(crate) async fn list_namespace(&self, namespace: &Namespace) -> Result<Listing> {
        let answer = self
            .call(&LIST, &keys(&self.prefix, namespace)[..1], &[])
            .await?;
        parse_listing(&answer).ok_or_else(|| nonsense("list", &answer))
    }

    /// Removes the namespace's keys (one script), then its registry entry;
    /// a namespace made again meanwhile is put back in the registry.
    pub(crate) async fn remove_namespace_keys(&self, namespace: &Namespace) -> Result<bool> {
        let answer = self
            .call(&REMOVE_NAMESPACE, &keys(&self.prefix, namespace), &[])
            .await?;
        let parts = match &answer {
            Value::Array(parts) => parts.as_slice(),
            _ => return Err(nonsense("remove_namespace", &answer)),
        };
        match parts {
            [status] if text(status) == Some("unknown") => Ok(false),
            [status, Value::Int(live)] if text(status) == Some("in_use") => {
                Err(Error::NamespaceInUse {
                    namespace: namespace.to_string(),
                    live: u32::try_from(*live).unwrap_or(u32::MAX),
                })
            }
            [status] if text(status) == Some("removed") => {
                self.registry_update(namespace, false).await?;
                let mut connection = self.connection.clone();
                let again: bool = redis::cmd("HEXISTS")
                    .arg(&keys(&self.prefix, namespace)[0])
                    .arg("max")
                    .query_async(&mut connection)
                    .await
                    .map_err(|e| Error::unavailable("redis", e))?;
                if again {
                    self.add_to_registry(namespace).await?;
                }
                Ok(true)
            }
            _ => Err(nonsense("remove_namespace", &answer)),
        }
    }

    pub(crate) async fn force_release_id(
        &self,
        namespace: &Namespace,
        id: WorkerId,
    ) -> Result<bool> {
        let keys = keys(&self.prefix, namespace);
        let answer = self.call(&FORCE_RELEASE, &keys, &[id.to_string()]).await?;
        match answer {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            other => Err(nonsense("force_release", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn listings_are_read_exactly() {
        let answer = Value::Array(
            [
                "ok",
                "7",
                "1",
                "0",
                "3",
                "0",
                "2",
                "18446744073709551615",
                "web-1:42",
                "1",
                "1500",
                "4",
                "5",
                "prod/pod-7",
            ]
            .into_iter()
            .map(bulk)
            .collect(),
        );
        let listing = parse_listing(&answer).unwrap();
        assert_eq!(listing.max_worker_id, Some(7));
        assert_eq!(listing.leases[0].id, WorkerId::from(1));
        assert_eq!(
            listing.leases[0].state,
            LeaseState::Live {
                remaining: Duration::from_millis(500)
            }
        );
        assert_eq!(listing.leases[1].state, LeaseState::Free);
        assert_eq!(listing.leases[1].watermark, u64::MAX);
        assert_eq!(listing.leases[0].holder.as_str(), "prod/pod-7");
        assert_eq!(listing.leases[1].holder.as_str(), "web-1:42");
        let unknown = Value::Array(vec![bulk("unknown")]);
        assert_eq!(parse_listing(&unknown), Some(Listing::unknown()));
        assert_eq!(
            parse_listing(&Value::Array(vec![bulk("ok"), bulk("x")])),
            None
        );
    }
}
