//! Segment counters on Redis: three hashes (each tag's max, step and
//! version) under one hash tag, one script per operation.

use async_trait::async_trait;
use redis::Value;
use workerid_segment::{Error, Result};
use workerid_segment::{Range, SegmentStore, Tag, TagInfo};

use crate::script::{SEGMENT_CREATE, SEGMENT_GIVE_BACK, SEGMENT_LIST, SEGMENT_RESERVE};
use crate::{nonsense, text, RedisStore};

impl RedisStore {
    /// The max, step and version hashes.
    fn segment_keys(&self) -> [String; 3] {
        [
            format!("{}:{{segments}}:max", self.prefix),
            format!("{}:{{segments}}:step", self.prefix),
            format!("{}:{{segments}}:version", self.prefix),
        ]
    }
}

fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        other => text(other).and_then(|s| s.parse().ok()),
    }
}

fn pairs(value: &Value) -> Vec<(String, u64)> {
    match value {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [k, v] => Some((text(k)?.to_string(), number(v)?)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[async_trait]
impl SegmentStore for RedisStore {
    fn segment_capabilities(&self) -> workerid_segment::SegmentCapabilities {
        workerid_segment::SegmentCapabilities {
            durable: self.durable,
            list: true,
            ..Default::default()
        }
    }

    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let args = [tag.to_string(), first_id.to_string(), step.to_string()];
        let answer = self
            .call(&SEGMENT_CREATE, &self.segment_keys()[..2], &args)
            .await?;
        match number(&answer) {
            Some(created) => Ok(created == 1),
            None => Err(nonsense("create_tag", &answer)),
        }
    }

    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let args = [
            tag.to_string(),
            step.map(|s| s.to_string()).unwrap_or_default(),
        ];
        let answer = self
            .call(&SEGMENT_RESERVE, &self.segment_keys(), &args)
            .await?;
        match &answer {
            Value::Array(parts) => match parts.as_slice() {
                [status, max, used, version] if text(status) == Some("ok") => {
                    match (number(max), number(used), number(version)) {
                        (Some(max), Some(used), Some(version)) => Range::below(max, used, version)
                            .ok_or_else(|| nonsense("reserve", &answer)),
                        _ => Err(nonsense("reserve", &answer)),
                    }
                }
                _ => Err(nonsense("reserve", &answer)),
            },
            other => match text(other) {
                Some("unknown") => Err(Error::UnknownTag {
                    tag: tag.to_string(),
                }),
                Some("exhausted") => Err(Error::TagExhausted {
                    tag: tag.to_string(),
                }),
                _ => Err(nonsense("reserve", &answer)),
            },
        }
    }

    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        let [max, _, version] = self.segment_keys();
        let args = [
            tag.to_string(),
            reserved.end().to_string(),
            reserved.version.to_string(),
            new_max.to_string(),
        ];
        let answer = self
            .call(&SEGMENT_GIVE_BACK, &[max, version], &args)
            .await?;
        match (text(&answer), number(&answer)) {
            (Some("unknown"), _) => Err(Error::UnknownTag {
                tag: tag.to_string(),
            }),
            (_, Some(given)) => Ok(given == 1),
            _ => Err(nonsense("give_back", &answer)),
        }
    }

    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        let answer = self
            .call(&SEGMENT_LIST, &self.segment_keys()[..2], &[])
            .await?;
        let Value::Array(parts) = &answer else {
            return Err(nonsense("list_tags", &answer));
        };
        let [maxes, steps] = parts.as_slice() else {
            return Err(nonsense("list_tags", &answer));
        };
        let steps: std::collections::HashMap<String, u64> = pairs(steps).into_iter().collect();
        let mut tags = pairs(maxes)
            .into_iter()
            .map(|(name, max_id)| {
                let step = steps.get(&name).copied().unwrap_or(0);
                Ok(TagInfo {
                    tag: Tag::new(name)?,
                    max_id,
                    step,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        tags.sort_by(|a, b| a.tag.cmp(&b.tag));
        Ok(tags)
    }
}
