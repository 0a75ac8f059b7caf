//! [`TimeLimited`]: a segment store whose every call answers within a
//! timeout, so that a store that hangs (a row lock held, a frozen server)
//! fails a call with `Unavailable` rather than holding a tag's switch, and
//! every caller queued behind it, and shutdown, for good.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

use crate::{Error, Range, Result, SegmentCapabilities, SegmentStore, Tag, TagInfo};

/// `inner`, each call of which fails with [`Error::Unavailable`] after
/// `timeout` without an answer. A reservation abandoned so may still have
/// been made in the store: its IDs are skipped, never handed out twice.
///
/// ```
/// use std::time::Duration;
/// use workerid_segment::{SegmentAllocator, SegmentOptions, TimeLimited};
///
/// # fn demo(store: impl workerid_segment::SegmentStore) {
/// // What `SegmentOptions::request_timeout` does for an allocator's calls.
/// let store = TimeLimited::new(store, Duration::from_secs(3));
/// let ids = SegmentAllocator::new(store, SegmentOptions { request_timeout: None, ..Default::default() });
/// # }
/// ```
#[derive(Debug)]
pub struct TimeLimited<S> {
    inner: S,
    timeout: Duration,
}

impl<S: SegmentStore> TimeLimited<S> {
    /// `inner`, its calls bounded by `timeout`.
    pub fn new(inner: S, timeout: Duration) -> Self {
        TimeLimited { inner, timeout }
    }

    async fn call<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(answer) => answer,
            Err(_) => Err(Error::unavailable(
                "segment store",
                format!("no answer within {:?}", self.timeout),
            )),
        }
    }
}

#[async_trait]
impl<S: SegmentStore> SegmentStore for TimeLimited<S> {
    fn segment_capabilities(&self) -> SegmentCapabilities {
        self.inner.segment_capabilities()
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        self.call(self.inner.create_tag(tag, first_id, step)).await
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        self.call(self.inner.reserve(tag, step)).await
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        self.call(self.inner.give_back(tag, reserved, new_max))
            .await
    }
    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        self.call(self.inner.list_tags()).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::{SegmentAllocator, SegmentOptions};

    /// A store that never answers.
    #[derive(Debug)]
    struct Hung;

    #[async_trait]
    impl SegmentStore for Hung {
        fn segment_capabilities(&self) -> SegmentCapabilities {
            SegmentCapabilities::default()
        }
        async fn create_tag(&self, _: &Tag, _: u64, _: u64) -> Result<bool> {
            std::future::pending().await
        }
        async fn reserve(&self, _: &Tag, _: Option<u64>) -> Result<Range> {
            std::future::pending().await
        }
        async fn give_back(&self, _: &Tag, _: Range, _: u64) -> Result<bool> {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_store_that_hangs_fails_each_call_after_the_timeout() {
        let timeout = Duration::from_millis(50);
        let options = SegmentOptions {
            request_timeout: Some(timeout),
            ..SegmentOptions::default()
        };
        let ids = SegmentAllocator::new(Hung, options);
        let started = Instant::now();
        let answer = ids.next_id("orders").await;
        assert!(
            matches!(&answer, Err(Error::Unavailable { source, .. }) if source.to_string().contains("no answer within")),
            "{answer:?}"
        );
        assert!(started.elapsed() >= timeout);
        let started = Instant::now();
        assert!(ids.create_tag("orders", 1, 10).await.is_err());
        ids.shutdown().await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            SegmentOptions::default().request_timeout,
            Some(Duration::from_secs(10))
        );
    }
}
