//! The `workerid.v1.Segments` service: the segment store behind the server,
//! for clients that serve IDs from buffers of their own. Calls go through
//! the same store handle as the server's own refills (its timeout, its
//! metrics).

use std::sync::Arc;

use tonic::{Request, Response, Status};
use workerid::segment::{self, SegmentStore, Tag};
use workerid_proto::v1::segments_server::Segments;
use workerid_proto::v1::{
    CapabilitiesRequest, CreateTagRequest, GiveBackRequest, GivenBack, ListTagsRequest,
    ReserveRequest, SegmentCapabilities, SegmentRange, TagCreated, TagInfo, TagList,
};

use super::page::PageRequest;
use super::receipts::{store_range, well_formed, Receipts};
use super::{observed, status};

/// The largest step a reservation may ask for (the store contract's bound).
const MAX_STEP: u64 = 1 << 40;

pub struct SegmentsService {
    pub store: Arc<dyn SegmentStore>,
    pub receipts: Receipts,
    /// The server's view of the tags, which a tag created here joins at
    /// once, so that `Ids` serves it on the next call.
    pub tags: Arc<crate::tags::Tags>,
    /// CreateTag takes the operator's token.
    pub tokens: super::Tokens,
}

fn tag(name: String) -> Result<Tag, Status> {
    Tag::new(name).map_err(|e| status::invalid("invalid_tag", e.to_string()))
}

fn step(step: u64) -> Result<u64, Status> {
    if (1..=MAX_STEP).contains(&step) {
        Ok(step)
    } else {
        Err(status::invalid(
            "invalid_step",
            format!("step must be 1 to {MAX_STEP}, not {step}"),
        ))
    }
}

fn failed(e: &segment::Error) -> Status {
    status::of_segment_error(e)
}

#[tonic::async_trait]
impl Segments for SegmentsService {
    async fn create_tag(
        &self,
        request: Request<CreateTagRequest>,
    ) -> Result<Response<TagCreated>, Status> {
        let answer = async {
            self.tokens.operator(&request)?;
            let r = request.into_inner();
            let tag = tag(r.tag)?;
            let step = step(r.step)?;
            // 0 is the field's default: the store's first ID, 1.
            segment::check_first_range(r.first_id.max(1), step)
                .map_err(|e| status::invalid("invalid_first_id", e.to_string()))?;
            let created = self
                .store
                .create_tag(&tag, r.first_id, step)
                .await
                .map_err(|e| failed(&e))?;
            // Created now or before: the store has it either way.
            self.tags.found(tag.as_str());
            Ok(TagCreated { created })
        };
        observed("/workerid.v1.Segments/CreateTag", answer).await
    }

    async fn reserve(
        &self,
        request: Request<ReserveRequest>,
    ) -> Result<Response<SegmentRange>, Status> {
        let answer = async {
            let r = request.into_inner();
            let tag = tag(r.tag)?;
            let step = match r.step {
                0 => None,
                n => Some(step(n)?),
            };
            // The floor reaches down into the client's previous range only
            // when that range is its own (signed) and still the tag's last
            // reservation, which a give-back leaving max_id where it is
            // confirms (it is refused once anything was reserved or given
            // back since). A range reserved after it that starts where it
            // ends then has nothing between them.
            let mut previous = r
                .previous
                .filter(|_| self.store.segment_capabilities().give_back)
                .and_then(|previous| self.receipts.verified(&tag, &previous));
            if let Some(range) = previous {
                let still_last = self.store.give_back(&tag, range, range.end()).await;
                previous = matches!(still_last, Ok(true)).then_some(range);
            }
            let range = self
                .store
                .reserve(&tag, step)
                .await
                .map_err(|e| failed(&e))?;
            let floor = match previous {
                Some(previous) if previous.end() == range.first => previous.first,
                _ => range.first,
            };
            Ok(self.receipts.sign(
                &tag,
                SegmentRange {
                    first: range.first,
                    last: range.last,
                    version: range.version,
                    floor,
                    receipt: Vec::new(),
                },
            ))
        };
        observed("/workerid.v1.Segments/Reserve", answer).await
    }

    async fn give_back(
        &self,
        request: Request<GiveBackRequest>,
    ) -> Result<Response<GivenBack>, Status> {
        let answer = async {
            let r = request.into_inner();
            let tag = tag(r.tag)?;
            let Some(reserved) = r.reserved.filter(well_formed) else {
                return Err(status::invalid(
                    "invalid_range",
                    format!(
                        "a give-back needs the range it returns, floor <= first <= last < {}",
                        segment::MAX_SEGMENT_ID
                    ),
                ));
            };
            let Some(range) = self.receipts.verified(&tag, &reserved) else {
                // A give-back above the range's end changes nothing, and
                // says whether the tag is known, as every give-back does.
                let unsigned = store_range(&reserved);
                self.store
                    .give_back(&tag, unsigned, unsigned.end() + 1)
                    .await
                    .map_err(|e| failed(&e))?;
                return Err(status::status(
                    tonic::Code::PermissionDenied,
                    "unknown_range",
                    "a give-back needs a range as Reserve answered it, receipt and all, \
                     from a server with the same give_back_key",
                ));
            };
            if r.new_max < reserved.floor {
                return Err(status::invalid(
                    "invalid_range",
                    format!(
                        "new_max {} is below the range's floor {}: only IDs this client \
                         reserved can be given back",
                        r.new_max, reserved.floor
                    ),
                ));
            }
            let taken = self
                .store
                .give_back(&tag, range, r.new_max)
                .await
                .map_err(|e| failed(&e))?;
            Ok(GivenBack { taken })
        };
        observed("/workerid.v1.Segments/GiveBack", answer).await
    }

    async fn list_tags(
        &self,
        request: Request<ListTagsRequest>,
    ) -> Result<Response<TagList>, Status> {
        let answer = async {
            let r = request.into_inner();
            let page = PageRequest::new(r.page_size, &r.page_token, |t| {
                Tag::new(t).ok().map(|_| t.to_owned())
            })?;
            let tags = self.store.list_tags().await.map_err(|e| failed(&e))?;
            let (tags, next_page_token) = page.take(tags, |t| t.tag.as_str().to_owned());
            Ok(TagList {
                tags: tags
                    .into_iter()
                    .map(|t| TagInfo {
                        tag: t.tag.as_str().into(),
                        max_id: t.max_id,
                        step: t.step,
                    })
                    .collect(),
                next_page_token,
            })
        };
        observed("/workerid.v1.Segments/ListTags", answer).await
    }

    async fn capabilities(
        &self,
        _request: Request<CapabilitiesRequest>,
    ) -> Result<Response<SegmentCapabilities>, Status> {
        let caps = self.store.segment_capabilities();
        let answer = SegmentCapabilities {
            durable: caps.durable,
            gapless: caps.gapless,
            list: caps.list,
            give_back: caps.give_back,
        };
        observed(
            "/workerid.v1.Segments/Capabilities",
            std::future::ready(Ok(answer)),
        )
        .await
    }
}
