//! [`Instrumented`] for segment stores: a span and metrics for every call.

use async_trait::async_trait;
use workerid_core::observe::{observe_store_call, Instrumented};

use crate::{Range, Result, SegmentCapabilities, SegmentStore, Tag, TagInfo};

#[async_trait]
impl<S: SegmentStore> SegmentStore for Instrumented<S> {
    fn segment_capabilities(&self) -> SegmentCapabilities {
        self.inner().segment_capabilities()
    }

    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let call = self.inner().create_tag(tag, first_id, step);
        observe_store_call(self.labels(), "create_tag", tag.as_str(), None, call).await
    }

    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let call = self.inner().reserve(tag, step);
        observe_store_call(self.labels(), "reserve", tag.as_str(), None, call).await
    }

    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        let call = self.inner().give_back(tag, reserved, new_max);
        observe_store_call(self.labels(), "give_back", tag.as_str(), None, call).await
    }

    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        let call = self.inner().list_tags();
        observe_store_call(self.labels(), "list_tags", "*", None, call).await
    }
}
