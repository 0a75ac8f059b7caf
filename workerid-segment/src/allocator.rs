//! Segment IDs of many tags from one store: a double buffer per tag, made
//! on first use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::time_limited::TimeLimited;
use crate::{
    check_first_range, check_step, Error, Result, SegmentOptions, SegmentStore, Tag, TagHandle,
};

/// Segment IDs of many tags from one store (Leaf-segment), with a double
/// buffer per tag.
///
/// ```
/// use workerid_segment::{SegmentAllocator, SegmentOptions, SegmentStore};
///
/// async fn demo(store: impl SegmentStore) -> workerid_segment::Result<()> {
///     let ids = SegmentAllocator::new(store, SegmentOptions::default());
///     ids.create_tag("orders", 1, 1_000).await?;
///     let id = ids.next_id("orders").await?;
///     let orders = ids.tag("orders")?; // a handle: the fast path for one tag
///     let next = orders.next_id().await?;
///     assert!(next > id);
///     ids.shutdown().await; // gives unused IDs back
///     Ok(())
/// }
/// ```
#[derive(Debug)]
pub struct SegmentAllocator {
    store: Arc<dyn SegmentStore>,
    options: SegmentOptions,
    tags: RwLock<HashMap<Tag, TagHandle>>,
    stalls: Arc<AtomicU64>,
    /// Set by [`shutdown`](Self::shutdown), under the write lock of `tags`:
    /// no handle is made after it.
    shut_down: AtomicBool,
}

impl SegmentAllocator {
    /// An allocator on `store`, whose calls `options.request_timeout`
    /// bounds.
    pub fn new(store: impl SegmentStore, options: SegmentOptions) -> Self {
        let store: Arc<dyn SegmentStore> = match options.request_timeout {
            Some(timeout) => Arc::new(TimeLimited::new(store, timeout)),
            None => Arc::new(store),
        };
        SegmentAllocator {
            store,
            options,
            tags: RwLock::new(HashMap::new()),
            stalls: Arc::default(),
            shut_down: AtomicBool::new(false),
        }
    }

    /// Creates `tag` (first ID `first_id`, default step `step`) unless it
    /// exists; returns whether it created it.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag, a step outside `1..=2^40`, a
    /// first ID of 0 or above 2^63 - 1, or a first range that would pass
    /// 2^63 - 1 ([`check_first_range`](crate::check_first_range)), before
    /// any I/O;
    /// [`Error::Unavailable`].
    pub async fn create_tag(&self, tag: &str, first_id: u64, step: u64) -> Result<bool> {
        let tag = Tag::new(tag)?;
        check_step(step)?;
        check_first_range(first_id, step)?;
        self.store.create_tag(&tag, first_id, step).await
    }

    /// A handle on `tag`'s buffers (made on first use; no I/O).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag; [`Error::Stopped`] for a tag
    /// without a handle yet once [`shutdown`](Self::shutdown) has begun (a
    /// handle made before answers `Stopped` on its own calls).
    pub fn tag(&self, tag: &str) -> Result<TagHandle> {
        let tag = Tag::new(tag)?;
        // Read-mostly: a shared lock on the hot path, the exclusive one only
        // the first time a tag is seen.
        if let Some(handle) = self
            .tags
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tag)
        {
            return Ok(handle.clone());
        }
        let mut tags = self.tags.write().unwrap_or_else(|e| e.into_inner());
        if self.shut_down.load(Ordering::Relaxed) && !tags.contains_key(&tag) {
            return Err(Error::Stopped {
                reason: format!("the segment allocator is shut down (tag {tag})"),
            });
        }
        let handle = tags.entry(tag.clone()).or_insert_with(|| {
            TagHandle::new(tag, self.store.clone(), self.options, self.stalls.clone())
        });
        Ok(handle.clone())
    }

    /// [`TagHandle::stalls`] summed over every handle this allocator has
    /// made: a counter that never goes down.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// The next ID of `tag`. A tag the store does not know leaves no handle
    /// behind (unless a caller of [`tag`](Self::tag) holds one), so names
    /// made up by clients cost no memory.
    ///
    /// # Errors
    /// As [`TagHandle::next_id`], and [`Error::InvalidConfig`] for a bad tag.
    pub async fn next_id(&self, tag: &str) -> Result<u64> {
        let handle = self.tag(tag)?;
        let answer = handle.next_id().await;
        if let Err(Error::UnknownTag { .. }) = answer {
            // Asked by name, as a service is, for a tag the store does not
            // know: keep no buffers for it, or every made-up name a client
            // sends would stay in memory for good.
            self.forget(handle);
        }
        answer
    }

    /// The handle on `tag` if this allocator has made one, without making it.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag.
    pub fn existing(&self, tag: &str) -> Result<Option<TagHandle>> {
        let tag = Tag::new(tag)?;
        Ok(self
            .tags
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tag)
            .cloned())
    }

    /// The tags this allocator has a handle for, by name (made by
    /// [`tag`](Self::tag) or a call by name, whether or not a segment has
    /// been loaded yet).
    pub fn tags_in_memory(&self) -> Vec<Tag> {
        let mut tags: Vec<Tag> = self
            .tags
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        tags.sort();
        tags
    }

    /// Drops `handle` and, if the map's entry for its tag is that handle,
    /// holds no IDs, and nobody else holds it (a caller of
    /// [`tag`](Self::tag), a request in flight), the entry too. Under the
    /// write lock, so of several requests for one unknown tag the last to
    /// finish removes it.
    pub(crate) fn forget(&self, handle: TagHandle) {
        let mut tags = self.tags.write().unwrap_or_else(|e| e.into_inner());
        let key = handle.0.tag.clone();
        let ours = tags
            .get(&key)
            .is_some_and(|h| Arc::ptr_eq(&h.0, &handle.0) && h.left() == 0);
        drop(handle);
        if ours && tags.get(&key).is_some_and(|h| Arc::strong_count(&h.0) == 1) {
            tags.remove(&key);
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SegmentStore> {
        &self.store
    }

    /// Stops handing out IDs and gives every unused tail back to the store
    /// where nothing was reserved since (otherwise the tail is lost, never
    /// reused). Every call after it answers [`Error::Stopped`], for a tag
    /// this allocator has served and for one it has not; a
    /// [`LocalIds`](crate::LocalIds) still issues the batch it holds, whose
    /// IDs were handed out to it.
    pub async fn shutdown(&self) {
        let handles: Vec<TagHandle> = {
            let tags = self.tags.write().unwrap_or_else(|e| e.into_inner());
            self.shut_down.store(true, Ordering::Relaxed);
            tags.values().cloned().collect()
        };
        for handle in handles {
            handle.close().await;
        }
    }
}
