//! Leaf's double buffer: IDs from memory, the next segment loaded in the
//! background before the current one runs out.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::cursor::{Claim, Cursor, Segment, MAX_CLAIM};
use super::{check_step, Range, SegmentStore, Tag};
use crate::{Error, Result};

/// How a [`SegmentAllocator`] buffers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentOptions {
    /// Load the next segment once this share of the current one is used
    /// (Leaf: 0.1).
    pub refill_at: f64,
    /// Double the step when a segment lasted less than this (Leaf: 15 min).
    pub grow_below: Duration,
    /// Halve the step when a segment lasted more than this (Leaf: 30 min).
    pub shrink_above: Duration,
    /// The step never goes below this...
    pub min_step: u64,
    /// ...nor above this.
    pub max_step: u64,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            refill_at: 0.1,
            grow_below: Duration::from_secs(15 * 60),
            shrink_above: Duration::from_secs(30 * 60),
            min_step: 1_000,
            max_step: 1_000_000,
        }
    }
}

/// The buffers of one tag.
#[derive(Debug)]
struct Buffers {
    tag: Tag,
    store: Arc<dyn SegmentStore>,
    options: SegmentOptions,
    /// The current segment.
    current: Cursor,
    prefetched: Mutex<Option<Segment>>,
    /// Serialises switching segments (never held on the fast path).
    switch: tokio::sync::Mutex<()>,
    /// Held by a background prefetch while it reserves, so that a shutdown
    /// waits for it and can give its segment back.
    prefetching: tokio::sync::Mutex<()>,
    /// The step of the next reservation; 0 until the first one.
    step: AtomicU64,
    /// Switches that waited for the store (see [`TagHandle::stalls`]).
    stalls: AtomicU64,
    /// The same, for every tag of the allocator (only ever added to).
    all_stalls: Arc<AtomicU64>,
    closed: AtomicBool,
}

/// A handle on one tag's buffers: the fastest way to take IDs of a tag.
#[derive(Debug, Clone)]
pub struct TagHandle(Arc<Buffers>);

impl TagHandle {
    /// The next ID of this tag. From memory, unless both buffers are empty.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when both buffers are empty and the store cannot
    /// answer; [`Error::UnknownTag`]; [`Error::TagExhausted`];
    /// [`Error::NotReady`] after [`SegmentAllocator::shutdown`].
    pub fn next_id(&self) -> impl Future<Output = Result<u64>> + Send + '_ {
        NextId {
            handle: self,
            switching: None,
        }
    }

    /// The next ID if the current segment has one, without waiting or I/O:
    /// the synchronous fast path (`None` when a switch to the next segment is
    /// due; [`next_id`](Self::next_id) does it).
    pub fn try_next_id(&self) -> Option<u64> {
        self.take()
    }

    /// A per-task batcher on this tag: it claims `batch` IDs at a time with
    /// one atomic add and hands them out without touching shared memory,
    /// for the highest rate (hundreds of millions of IDs per second on one
    /// thread). IDs stay unique; across batchers they are not in order. A
    /// batcher's unused IDs are lost when it is dropped (at most `batch - 1`).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a batch of 0 or above 2^32.
    pub fn local(&self, batch: u64) -> Result<LocalIds> {
        if !(1..=MAX_CLAIM).contains(&batch) {
            return Err(Error::invalid_config(format!(
                "a batch of {batch} IDs (1 to 2^32)"
            )));
        }
        Ok(LocalIds {
            handle: self.clone(),
            next: 0,
            end: 0,
            batch,
        })
    }

    /// How many times a caller found both buffers empty and waited for the
    /// store until it got a segment (a wait that ended in an error, an
    /// unknown tag or a store down, is not counted): the first call, then
    /// only when a segment ran out before the next one was loaded (a store slower than the IDs are taken; the
    /// dynamic step grows until segments last long enough). A number that
    /// keeps rising under steady load asks for a larger `min_step` or an
    /// earlier `refill_at`.
    pub fn stalls(&self) -> u64 {
        self.0.stalls.load(Ordering::Relaxed)
    }

    /// IDs left in memory (current segment and the prefetched one).
    pub fn left(&self) -> u64 {
        let prefetched = self.lock_prefetched().as_ref().map_or(0, Segment::len);
        self.0.current.left() + prefetched
    }

    /// The fast path: one atomic add on the current segment.
    #[inline]
    fn take(&self) -> Option<u64> {
        self.claim(1).map(|(first, _)| first)
    }

    /// Up to `n` IDs `first..end` of the current segment (None when a switch
    /// is due), starting the next segment's load if they include the
    /// refill point.
    #[inline]
    fn claim(&self, n: u64) -> Option<(u64, u64)> {
        match self.0.current.claim(n) {
            Claim::Ids { first, end, refill } => {
                if let Some(loaded_at) = refill {
                    self.prefetch(loaded_at);
                }
                Some((first, end))
            }
            Claim::UsedUp => None,
        }
    }

    fn lock_prefetched(&self) -> std::sync::MutexGuard<'_, Option<Segment>> {
        self.0.prefetched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Loads the next segment in the background (once per segment, and not
    /// while one is waiting already).
    fn prefetch(&self, current_loaded_at: Instant) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.lock_prefetched().is_some() {
            return;
        }
        let handle = self.clone();
        runtime.spawn(async move {
            let _prefetching = handle.0.prefetching.lock().await;
            if handle.0.closed.load(Ordering::Acquire) || handle.lock_prefetched().is_some() {
                return;
            }
            match handle.load(current_loaded_at).await {
                Ok(segment) => handle.keep_prefetched(segment).await,
                Err(e) => {
                    tracing::warn!(tag = %handle.0.tag, "prefetching the next segment failed: {e}")
                }
            }
        });
    }

    /// Keeps `segment` as the next one or, if one is waiting already (the
    /// switch path loaded one meanwhile), gives it back if nothing was
    /// reserved since; otherwise its IDs are lost, never reused.
    async fn keep_prefetched(&self, segment: Segment) {
        let surplus = {
            let mut slot = self.lock_prefetched();
            if slot.is_none() {
                *slot = Some(segment);
                return;
            }
            segment
        };
        let b = &self.0;
        if let Err(e) = b
            .store
            .give_back(&b.tag, surplus.range(), surplus.first - 1)
            .await
        {
            tracing::warn!(tag = %b.tag, "could not give a surplus segment back: {e}");
        }
    }

    /// Reserves a segment with Leaf's dynamic step.
    async fn load(&self, previous_loaded_at: Instant) -> Result<Segment> {
        let b = &self.0;
        let step = b.step.load(Ordering::Relaxed);
        let range = b.store.reserve(&b.tag, (step > 0).then_some(step)).await?;
        let used = range.len();
        let lasted = previous_loaded_at.elapsed();
        let next = if step == 0 {
            used
        } else if lasted < b.options.grow_below {
            used.saturating_mul(2)
        } else if lasted > b.options.shrink_above {
            used / 2
        } else {
            used
        };
        b.step.store(
            next.clamp(
                b.options.min_step,
                b.options.max_step.max(b.options.min_step),
            ),
            Ordering::Relaxed,
        );
        tracing::debug!(tag = %b.tag, first = range.first, last = range.last, "segment loaded");
        Ok(Segment::new(range, b.options.refill_at))
    }

    async fn switch_and_take(&self) -> Result<u64> {
        let b = &self.0;
        loop {
            if b.closed.load(Ordering::Acquire) {
                return Err(Error::NotReady {
                    reason: format!("the segment allocator of tag {} is shut down", b.tag),
                });
            }
            let _switching = b.switch.lock().await;
            if let Some(id) = self.take() {
                return Ok(id);
            }
            let waited = self.lock_prefetched().is_none();
            // Waits for a prefetch in flight rather than reserving beside it:
            // every reservation of a tag is serialised, so none is wasted.
            let _prefetching = b.prefetching.lock().await;
            if b.closed.load(Ordering::Acquire) {
                // Shut down while this call waited for the locks: no segment
                // after the shutdown (its tail would never be given back).
                continue;
            }
            let prefetched = self.lock_prefetched().take();
            let segment = match prefetched {
                Some(segment) => segment,
                None => self.load(b.current.loaded_at()).await?,
            };
            if waited {
                b.stalls.fetch_add(1, Ordering::Relaxed);
                b.all_stalls.fetch_add(1, Ordering::Relaxed);
            }
            b.current.install(segment);
            if let Some(id) = self.take() {
                return Ok(id);
            }
        }
    }

    /// Stops handing out IDs and gives the unused tails back to the store
    /// where nothing was reserved since.
    async fn close(&self) {
        let b = &self.0;
        b.closed.store(true, Ordering::Release);
        let _switching = b.switch.lock().await;
        let _prefetching = b.prefetching.lock().await;
        // Claims every ID not handed out yet, atomically with the fast path.
        let current = b.current.install(Segment::empty());
        let unused_from = current.unclaimed_from;
        let has_tail = current.first <= current.last && unused_from <= current.last;
        let current_range = Range {
            first: current.first,
            last: current.last,
            version: current.version,
        };
        // One give-back: the store compares the version of the last range
        // reserved, so the current tail goes back with the prefetched range
        // when the two are adjacent (nothing was reserved between them).
        let (reserved, new_max) = match self.lock_prefetched().take() {
            Some(next) if has_tail && next.first == current.last + 1 => {
                (next.range(), unused_from - 1)
            }
            Some(next) => (next.range(), next.first - 1),
            None if has_tail => (current_range, unused_from - 1),
            None => return,
        };
        match b.store.give_back(&b.tag, reserved, new_max).await {
            Ok(given) => tracing::debug!(tag = %b.tag, given, "unused IDs given back"),
            Err(e) => tracing::warn!(tag = %b.tag, "could not give the unused IDs back: {e}"),
        }
    }
}

/// The future of [`TagHandle::next_id`]: a plain struct rather than an
/// `async fn`'s state machine, so that the fast path (no switch due) costs
/// the claim alone; the switch, rare, is boxed.
struct NextId<'a> {
    handle: &'a TagHandle,
    switching: Option<Pin<Box<dyn Future<Output = Result<u64>> + Send + 'a>>>,
}

impl Future for NextId<'_> {
    type Output = Result<u64>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<u64>> {
        let this = &mut *self;
        if this.switching.is_none() {
            if let Some(id) = this.handle.take() {
                return Poll::Ready(Ok(id));
            }
        }
        let handle = this.handle;
        this.switching
            .get_or_insert_with(|| Box::pin(handle.switch_and_take()))
            .as_mut()
            .poll(cx)
    }
}

/// A batcher made by [`TagHandle::local`]: owned by one task, `&mut self`.
#[derive(Debug)]
pub struct LocalIds {
    handle: TagHandle,
    next: u64,
    end: u64,
    batch: u64,
}

impl LocalIds {
    /// The next ID: from the local batch, else a new batch from the tag's
    /// current segment, else as [`TagHandle::next_id`].
    ///
    /// # Errors
    /// As [`TagHandle::next_id`].
    pub async fn next_id(&mut self) -> Result<u64> {
        if self.next < self.end {
            let id = self.next;
            self.next += 1;
            return Ok(id);
        }
        if let Some((first, end)) = self.handle.claim(self.batch) {
            self.next = first + 1;
            self.end = end;
            return Ok(first);
        }
        Box::pin(self.handle.switch_and_take()).await
    }
}

/// Segment IDs of many tags from one store (Leaf-segment), with a double
/// buffer per tag.
///
/// ```
/// use workerid_lease::segment::{SegmentAllocator, SegmentOptions, SegmentStore};
///
/// async fn demo(store: impl SegmentStore) -> workerid_lease::Result<()> {
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
}

impl SegmentAllocator {
    /// An allocator on `store`.
    pub fn new(store: impl SegmentStore, options: SegmentOptions) -> Self {
        SegmentAllocator {
            store: Arc::new(store),
            options,
            tags: RwLock::new(HashMap::new()),
            stalls: Arc::default(),
        }
    }

    /// Creates `tag` (first ID `first_id`, default step `step`) unless it
    /// exists; returns whether it created it.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag, a step outside `1..=2^40`, or
    /// a first ID of 0 or above 2^63 - 1, before any I/O;
    /// [`Error::Unavailable`].
    pub async fn create_tag(&self, tag: &str, first_id: u64, step: u64) -> Result<bool> {
        let tag = Tag::new(tag)?;
        check_step(step)?;
        if first_id == 0 || first_id > super::MAX_SEGMENT_ID {
            return Err(Error::invalid_config(format!(
                "first ID {first_id} must be in 1..={}",
                super::MAX_SEGMENT_ID
            )));
        }
        self.store.create_tag(&tag, first_id, step).await
    }

    /// A handle on `tag`'s buffers (made on first use; no I/O).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag.
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
        let handle = tags.entry(tag.clone()).or_insert_with(|| {
            TagHandle(Arc::new(Buffers {
                tag,
                store: self.store.clone(),
                options: self.options,
                current: Cursor::new(),
                prefetched: Mutex::new(None),
                switch: tokio::sync::Mutex::new(()),
                prefetching: tokio::sync::Mutex::new(()),
                step: AtomicU64::new(0),
                stalls: AtomicU64::new(0),
                all_stalls: self.stalls.clone(),
                closed: AtomicBool::new(false),
            }))
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
    fn forget(&self, handle: TagHandle) {
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
    /// reused).
    pub async fn shutdown(&self) {
        let handles: Vec<TagHandle> = self
            .tags
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for handle in handles {
            handle.close().await;
        }
    }
}

/// Gapless sequences (consecutive numbers, no holes): every ID is one atomic round
/// trip to the store, consecutive, nothing cached, nothing lost on a crash.
#[derive(Debug)]
pub struct GaplessSequence {
    store: Arc<dyn SegmentStore>,
}

impl GaplessSequence {
    /// Sequences on `store`.
    pub fn new(store: impl SegmentStore) -> Self {
        GaplessSequence {
            store: Arc::new(store),
        }
    }

    /// The next number of `tag`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad tag; [`Error::Unsupported`] on a
    /// store that does not declare
    /// [`gapless`](super::SegmentCapabilities::gapless); the store's errors.
    pub async fn next_id(&self, tag: &str) -> Result<u64> {
        if !self.store.segment_capabilities().gapless {
            return Err(Error::Unsupported {
                operation: "gapless sequences",
            });
        }
        Ok(self.store.reserve(&Tag::new(tag)?, Some(1)).await?.first)
    }
}
