//! The operator's methods: list a namespace, force a release. One script each.

use std::time::Duration;

use redis::Value;
use workerid_core::{LeaseInfo, LeaseState, Listing, Namespace, Result, WorkerId};

use crate::keys::keys;
use crate::script::{FORCE_RELEASE, LIST};
use crate::{nonsense, text, RedisStore};

fn number<T: std::str::FromStr>(value: &Value) -> Option<T> {
    text(value).and_then(|s| s.parse().ok())
}

/// Reads `{'ok', max, now, (id, ends, fence, watermark)*}` or `{'unknown'}`.
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
                .chunks(4)
                .map(|entry| match entry {
                    [id, ends, fence, watermark] => {
                        let ends: u64 = number(ends)?;
                        Some(LeaseInfo {
                            id: WorkerId::from(number::<u32>(id)?),
                            state: LeaseState::judge(ends != 0, Duration::from_millis(ends), now),
                            fence: number(fence)?,
                            watermark: number(watermark)?,
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
    pub(crate) async fn list_namespace(&self, namespace: &Namespace) -> Result<Listing> {
        let answer = self
            .call(&LIST, &keys(&self.prefix, namespace)[..1], &[])
            .await?;
        parse_listing(&answer).ok_or_else(|| nonsense("list", &answer))
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
                "1",
                "1500",
                "4",
                "5",
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
        let unknown = Value::Array(vec![bulk("unknown")]);
        assert_eq!(parse_listing(&unknown), Some(Listing::unknown()));
        assert_eq!(
            parse_listing(&Value::Array(vec![bulk("ok"), bulk("x")])),
            None
        );
    }
}
