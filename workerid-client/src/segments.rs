//! [`SegmentStore`] over the server's `workerid.v1.Segments`.

use std::collections::HashMap;

use async_trait::async_trait;
use workerid_proto::v1::{
    CreateTagRequest, GiveBackRequest, ListTagsRequest, ReserveRequest, SegmentRange,
};
use workerid_segment::{Range, Result, SegmentCapabilities, SegmentStore, Tag, TagInfo};

use crate::errors::{metadata, segment_error};
use crate::pages::{every_page, Page};
use crate::ServerStore;

impl ServerStore {
    fn last_reserved(&self) -> std::sync::MutexGuard<'_, HashMap<String, SegmentRange>> {
        self.last_reserved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl SegmentStore for ServerStore {
    fn segment_capabilities(&self) -> SegmentCapabilities {
        self.segment_capabilities
    }

    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let answer = self
            .segments
            .clone()
            .create_tag(CreateTagRequest {
                tag: tag.as_str().into(),
                first_id,
                step,
            })
            .await
            .map_err(|s| segment_error(&s, tag.as_str(), "create_tag"))?;
        Ok(answer.into_inner().created)
    }

    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let previous = self.last_reserved().get(tag.as_str()).cloned();
        let answer = self
            .segments
            .clone()
            .reserve(ReserveRequest {
                tag: tag.as_str().into(),
                step: step.unwrap_or(0),
                previous,
            })
            .await
            .map_err(|s| segment_error(&s, tag.as_str(), "reserve"))?
            .into_inner();
        if answer.first > answer.last
            || answer.last > workerid_segment::MAX_SEGMENT_ID
            || answer.floor > answer.first
        {
            return Err(workerid_segment::Error::unavailable(
                "workerid-server",
                format!(
                    "the server answered a range that cannot be: {}..={} (floor {})",
                    answer.first, answer.last, answer.floor
                ),
            ));
        }
        let range = Range {
            first: answer.first,
            last: answer.last,
            version: answer.version,
        };
        // Of two reservations racing for one tag, the one kept may be the
        // earlier: a give-back of the other is then answered false, IDs
        // skipped rather than handed out twice.
        self.last_reserved().insert(tag.as_str().to_owned(), answer);
        Ok(range)
    }

    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        // Without the receipt (not the last range this store reserved of the
        // tag) the server refuses the give-back, and still reports an
        // unknown tag.
        let signed = self
            .last_reserved()
            .get(tag.as_str())
            .cloned()
            .filter(|kept| {
                (kept.first, kept.last, kept.version)
                    == (reserved.first, reserved.last, reserved.version)
            });
        let has_receipt = signed.is_some();
        // Below the floor the server refuses the whole give-back (the
        // previous range was not confirmed as this client's): the tail of
        // this range at least goes back.
        let new_max = signed
            .as_ref()
            .map_or(new_max, |kept| new_max.max(kept.floor));
        let range = signed.unwrap_or(SegmentRange {
            first: reserved.first,
            last: reserved.last,
            version: reserved.version,
            floor: reserved.first,
            receipt: Vec::new(),
        });
        let answer = self
            .segments
            .clone()
            .give_back(GiveBackRequest {
                tag: tag.as_str().into(),
                reserved: Some(range),
                new_max,
            })
            .await;
        match answer {
            Ok(answer) => {
                let taken = answer.into_inner().taken;
                if taken && has_receipt {
                    // Its IDs are the tag's again: no later Reserve may name
                    // it as this client's previous range.
                    self.last_reserved().remove(tag.as_str());
                }
                Ok(taken)
            }
            Err(refused) => match metadata(&refused, workerid_proto::CODE_KEY) {
                // Not a range this store can give back: not given back.
                Some("unknown_range") if !has_receipt => Ok(false),
                Some("invalid_range") if has_receipt => Ok(false),
                Some("unknown_range") => Err(workerid_segment::Error::unavailable(
                    "workerid-server",
                    "the server refused the receipt of a range it reserved: the servers \
                     behind this address need one give_back_key",
                )),
                _ => Err(segment_error(&refused, tag.as_str(), "give_back")),
            },
        }
    }

    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        let (tags, ()) = every_page(|page_token| {
            let mut client = self.segments.clone();
            async move {
                let page = client
                    .list_tags(ListTagsRequest {
                        page_size: 0,
                        page_token,
                    })
                    .await?
                    .into_inner();
                Ok(Page {
                    entries: page.tags,
                    next: page.next_page_token,
                    about: (),
                })
            }
        })
        .await
        .map_err(|s| segment_error(&s, "", "list_tags"))?;
        tags.into_iter()
            .map(|t| {
                let tag = Tag::new(t.tag).map_err(|e| {
                    workerid_segment::Error::unavailable(
                        "workerid-server",
                        format!("the server answered nonsense: {e}"),
                    )
                })?;
                Ok(TagInfo {
                    tag,
                    max_id: t.max_id,
                    step: t.step,
                })
            })
            .collect()
    }
}
