//! Segment counters on etcd: one key per tag, `<max_id> <step> <nonce>`,
//! moved forward by a compare-and-swap on the key's revision (etcd's own
//! recipe for sequence numbers).
//!
//! The store remembers the last value and revision it saw of each tag, so an
//! uncontended reservation is one transaction; a lost race returns the
//! current value in the same answer and the next attempt uses it.
//! Reservations of one tag from one store take turns (an in-process lock),
//! so only other processes can make a swap fail. The nonce
//! of each write lets an attempt whose answer was lost recognise its own
//! reservation instead of taking a second range.
//!
//! A range's version is the revision its reservation wrote: etcd never hands
//! a revision out twice, so a give-back that compares it is refused once
//! the key was written since, whatever its max.

use async_trait::async_trait;
use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use rand::Rng;
use workerid_segment::{Error, Result};
use workerid_segment::{Range, SegmentStore, Tag, TagInfo, MAX_SEGMENT_ID};

use crate::keys::{segment, segments};
use crate::{lock, nonsense, EtcdStore};

/// A tag's counter as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    max: u64,
    step: u64,
    nonce: u64,
    revision: i64,
}

fn encode(max: u64, step: u64, nonce: u64) -> String {
    format!("{max} {step} {nonce:x}")
}

fn decode(value: &[u8], revision: i64) -> Option<Seen> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split(' ');
    let seen = Seen {
        max: parts.next()?.parse().ok()?,
        step: parts.next()?.parse().ok()?,
        nonce: u64::from_str_radix(parts.next()?, 16).ok()?,
        revision,
    };
    parts.next().is_none().then_some(seen)
}

/// The tag as the else branch of a swap read it (None: the tag is gone).
fn reread(what: &str, answer: &TxnResponse) -> Result<Option<Seen>> {
    match answer.op_responses().first() {
        Some(TxnOpResponse::Get(get)) => match get.kvs().first() {
            None => Ok(None),
            Some(kv) => decode(kv.value(), kv.mod_revision())
                .map(Some)
                .ok_or_else(|| nonsense(what, answer)),
        },
        _ => Err(nonsense(what, answer)),
    }
}

impl EtcdStore {
    /// Sets the tag to `max` if its revision is still `seen`'s; returns the
    /// answer and whether it was sent more than once.
    async fn swap(
        &self,
        key: &str,
        seen: &Seen,
        max: u64,
        nonce: u64,
    ) -> Result<(TxnResponse, bool)> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, seen.revision)])
            .and_then([TxnOp::put(key, encode(max, seen.step, nonce), None)])
            .or_else([TxnOp::get(key, None)]);
        let answer = self.txn("segment swap", txn).await?;
        Ok((answer.value, answer.retried))
    }

    async fn read_tag(&self, key: &str) -> Result<Option<Seen>> {
        let answer = self
            .inner
            .cluster
            .call("segment read", |mut c| {
                let key = key.to_string();
                async move { c.get(key, None).await }
            })
            .await?
            .value;
        match answer.kvs().first() {
            None => Ok(None),
            Some(kv) => decode(kv.value(), kv.mod_revision())
                .map(Some)
                .ok_or_else(|| nonsense("segment read", &answer)),
        }
    }

    fn tag_lock(&self, tag: &Tag) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        lock(&self.inner.tag_locks)
            .entry(tag.to_string())
            .or_default()
            .clone()
    }

    fn seen(&self, tag: &Tag) -> Option<Seen> {
        lock(&self.inner.tags).get(tag.as_str()).copied()
    }

    fn see(&self, tag: &Tag, seen: Option<Seen>) {
        let mut tags = lock(&self.inner.tags);
        match seen {
            Some(seen) => tags.insert(tag.to_string(), seen),
            None => tags.remove(tag.as_str()),
        };
    }
}

#[async_trait]
impl SegmentStore for EtcdStore {
    fn segment_capabilities(&self) -> workerid_segment::SegmentCapabilities {
        workerid_segment::SegmentCapabilities {
            durable: true,
            list: true,
            ..Default::default()
        }
    }

    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let key = segment(&self.inner.prefix, tag);
        let value = encode(first_id, step, 0);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, None)]);
        let answer = self.txn("create tag", txn).await?;
        // Sent twice after a lost answer, the second attempt finds the tag
        // the first one created.
        Ok(answer.value.succeeded() || (answer.retried && self.read_tag_created(tag).await?))
    }

    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let turn = self.tag_lock(tag);
        let _turn = turn.lock().await;
        let key = segment(&self.inner.prefix, tag);
        let unknown = || Error::UnknownTag {
            tag: tag.to_string(),
        };
        let mut current = match self.seen(tag) {
            Some(seen) => seen,
            None => self.read_tag(&key).await?.ok_or_else(unknown)?,
        };
        let nonce: u64 = rand::rng().random();
        loop {
            let used = step.unwrap_or(current.step);
            let max = current
                .max
                .checked_add(used)
                .filter(|m| *m <= MAX_SEGMENT_ID)
                .ok_or_else(|| Error::TagExhausted {
                    tag: tag.to_string(),
                })?;
            let range = |revision: i64| Range {
                first: current.max,
                last: max - 1,
                version: u64::try_from(revision).unwrap_or(0),
            };
            let (answer, retried) = self.swap(&key, &current, max, nonce).await?;
            if answer.succeeded() {
                let revision = answer.header().map(|h| h.revision()).unwrap_or(0);
                self.see(
                    tag,
                    Some(Seen {
                        max,
                        step: current.step,
                        nonce,
                        revision,
                    }),
                );
                return Ok(range(revision));
            }
            match reread("reserve", &answer)? {
                None => {
                    self.see(tag, None);
                    return Err(unknown());
                }
                Some(now) if retried && now.nonce == nonce && now.max == max => {
                    self.see(tag, Some(now));
                    return Ok(range(now.revision));
                }
                Some(now) => current = now,
            }
        }
    }

    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        let key = segment(&self.inner.prefix, tag);
        let Some(current) = self.read_tag(&key).await? else {
            return Err(Error::UnknownTag {
                tag: tag.to_string(),
            });
        };
        if new_max > reserved.end() {
            return Ok(false);
        }
        let written_since = u64::try_from(current.revision).ok() != Some(reserved.version);
        if current.max != reserved.end() || written_since {
            return Ok(false);
        }
        let nonce: u64 = rand::rng().random();
        let (answer, retried) = self.swap(&key, &current, new_max, nonce).await?;
        self.see(tag, None);
        if answer.succeeded() {
            return Ok(true);
        }
        Ok(retried && matches!(reread("give_back", &answer)?, Some(now) if now.nonce == nonce))
    }

    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        let prefix = segments(&self.inner.prefix);
        let answer = self
            .inner
            .cluster
            .call("list tags", |mut c| {
                let prefix = prefix.clone();
                async move { c.get(prefix, Some(GetOptions::new().with_prefix())).await }
            })
            .await?
            .value;
        let mut tags = Vec::with_capacity(answer.kvs().len());
        for kv in answer.kvs() {
            let name = kv
                .key_str()
                .ok()
                .and_then(|k| k.strip_prefix(&prefix))
                .ok_or_else(|| nonsense::<Error>("list tags", kv))?;
            let seen = decode(kv.value(), kv.mod_revision())
                .ok_or_else(|| nonsense::<Error>("list tags", kv))?;
            tags.push(TagInfo {
                tag: Tag::new(name)?,
                max_id: seen.max,
                step: seen.step,
            });
        }
        tags.sort_by(|a, b| a.tag.cmp(&b.tag));
        Ok(tags)
    }
}

impl EtcdStore {
    /// Whether `tag` exists and was never reserved from (a create whose
    /// answer was lost made it).
    async fn read_tag_created(&self, tag: &Tag) -> Result<bool> {
        let key = segment(&self.inner.prefix, tag);
        Ok(matches!(self.read_tag(&key).await?, Some(seen) if seen.nonce == 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let seen = decode(encode(41, 1000, 0xabc).as_bytes(), 7).unwrap();
        assert_eq!(
            seen,
            Seen {
                max: 41,
                step: 1000,
                nonce: 0xabc,
                revision: 7
            }
        );
        assert!(decode(b"41 1000", 7).is_none());
        assert!(decode(b"41 1000 0 extra", 7).is_none());
    }
}
