//! [`SegmentStore`] over the server's `workerid.v1.Segments`.

use async_trait::async_trait;
use workerid_proto::v1::{
    CreateTagRequest, GiveBackRequest, ListTagsRequest, ReserveRequest, SegmentRange,
};
use workerid_segment::{Range, Result, SegmentCapabilities, SegmentStore, Tag, TagInfo};

use crate::errors::segment_error;
use crate::pages::every_page;
use crate::ServerStore;

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
        let answer = self
            .segments
            .clone()
            .reserve(ReserveRequest {
                tag: tag.as_str().into(),
                step: step.unwrap_or(0),
            })
            .await
            .map_err(|s| segment_error(&s, tag.as_str(), "reserve"))?
            .into_inner();
        if answer.first > answer.last {
            return Err(workerid_segment::Error::unavailable(
                "workerid-server",
                format!("the server answered an empty range {answer:?}"),
            ));
        }
        Ok(Range {
            first: answer.first,
            last: answer.last,
            version: answer.version,
        })
    }

    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        let answer = self
            .segments
            .clone()
            .give_back(GiveBackRequest {
                tag: tag.as_str().into(),
                reserved: Some(SegmentRange {
                    first: reserved.first,
                    last: reserved.last,
                    version: reserved.version,
                }),
                new_max,
            })
            .await
            .map_err(|s| segment_error(&s, tag.as_str(), "give_back"))?;
        Ok(answer.into_inner().taken)
    }

    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        let tags = every_page(|page_token| {
            let mut client = self.segments.clone();
            async move {
                let page = client
                    .list_tags(ListTagsRequest {
                        page_size: 0,
                        page_token,
                    })
                    .await?
                    .into_inner();
                Ok((page.tags, page.next_page_token))
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
