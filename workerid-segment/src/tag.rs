//! Leaf's double buffer for one tag: IDs from memory, the next segment
//! loaded in the background before the current one runs out.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::cursor::{Claim, Cursor, Segment, MAX_CLAIM};
use tracing::Instrument;
use workerid_core::observe::ErrorType;

use crate::meters::TagMeters;
use crate::{Error, LocalIds, Range, Result, SegmentOptions, SegmentStore, Tag};

/// The buffers of one tag.
#[derive(Debug)]
pub(crate) struct Buffers {
    pub(crate) tag: Tag,
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
    /// The tag's own step, its first segment's: the floor of the step
    /// unless [`SegmentOptions::min_step`] sets one; 0 until then.
    own_step: AtomicU64,
    /// Switches that waited for the store (see [`TagHandle::stalls`]).
    stalls: AtomicU64,
    /// The same, for every tag of the allocator (only ever added to).
    all_stalls: Arc<AtomicU64>,
    closed: AtomicBool,
    /// Whether the store is failing, and whether a probe runs.
    outage: Mutex<Outage>,
    meters: TagMeters,
}

/// A store outage as one tag sees it.
#[derive(Debug, Default)]
struct Outage {
    /// The store and the last failure, while the store is failing.
    failing: Option<(&'static str, String)>,
    /// Whether a background probe runs (at most one per tag).
    probing: bool,
}

/// The first probe's delay after a failure; it doubles up to
/// [`SegmentOptions::outage_probe_max`].
const FIRST_PROBE: Duration = Duration::from_millis(10);

/// A handle on one tag's buffers: the fastest way to take IDs of a tag.
#[derive(Debug, Clone)]
pub struct TagHandle(pub(crate) Arc<Buffers>);

impl TagHandle {
    /// Empty buffers for `tag`; the first call loads a segment.
    pub(crate) fn new(
        tag: Tag,
        store: Arc<dyn SegmentStore>,
        options: SegmentOptions,
        all_stalls: Arc<AtomicU64>,
    ) -> TagHandle {
        TagHandle(Arc::new(Buffers {
            meters: TagMeters::new(&tag),
            tag,
            store,
            options,
            current: Cursor::new(),
            prefetched: Mutex::new(None),
            switch: tokio::sync::Mutex::new(()),
            prefetching: tokio::sync::Mutex::new(()),
            step: AtomicU64::new(0),
            own_step: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            all_stalls,
            closed: AtomicBool::new(false),
            outage: Mutex::new(Outage::default()),
        }))
    }

    /// The next ID of this tag. From memory, unless both buffers are empty.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when both buffers are empty and the store cannot
    /// answer; [`Error::UnknownTag`]; [`Error::TagExhausted`];
    /// [`Error::Stopped`] after [`SegmentAllocator::shutdown`](crate::SegmentAllocator::shutdown).
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
    /// Several threads on one tag scale with a batcher each and batches of
    /// a thousand or so; with small batches their claims contend for one
    /// cache line.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a batch of 0 or above 2^32.
    pub fn local(&self, batch: u64) -> Result<LocalIds> {
        if !(1..=MAX_CLAIM).contains(&batch) {
            return Err(Error::invalid_config(format!(
                "a batch of {batch} IDs (1 to 2^32)"
            )));
        }
        Ok(LocalIds::new(self.clone(), batch))
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

    /// IDs left in memory, after loading a segment if there are none,
    /// without handing out an ID: what a health check asks (can this tag
    /// be served now?).
    ///
    /// # Errors
    /// As [`next_id`](Self::next_id) when no segment can be loaded.
    pub async fn fill(&self) -> Result<u64> {
        let left = self.left();
        if left > 0 {
            return Ok(left);
        }
        let b = &self.0;
        self.fail_fast()?;
        let _switching = b.switch.lock().await;
        let _prefetching = b.prefetching.lock().await;
        self.check_open()?;
        if self.left() == 0 {
            self.fail_fast()?;
            let segment = self.load_or_probe(b.current.loaded_at()).await?;
            *self.lock_prefetched() = Some(segment);
        }
        Ok(self.left())
    }

    /// Whether the store is failing: requests that need it are answered
    /// at once while the probe runs.
    pub fn store_failing(&self) -> bool {
        self.lock_outage().failing.is_some()
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
    pub(crate) fn claim(&self, n: u64) -> Option<(u64, u64)> {
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

    fn lock_outage(&self) -> std::sync::MutexGuard<'_, Outage> {
        self.0.outage.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_open(&self) -> Result<()> {
        if self.0.closed.load(Ordering::Acquire) {
            return Err(Error::Stopped {
                reason: format!("the segment allocator of tag {} is shut down", self.0.tag),
            });
        }
        Ok(())
    }

    /// [`Error::Unavailable`] at once while the store is failing.
    fn fail_fast(&self) -> Result<()> {
        match &self.lock_outage().failing {
            None => Ok(()),
            Some((store, cause)) => Err(Error::unavailable(
                store,
                format!("{cause} (answered without a store call while the store is probed)"),
            )),
        }
    }

    /// Loads a segment; a store that cannot answer puts the tag in outage
    /// mode and starts the probe.
    async fn load_or_probe(&self, previous_loaded_at: Instant) -> Result<Segment> {
        let loaded = self.load(previous_loaded_at).await;
        match &loaded {
            Err(Error::Unavailable { store, source }) => {
                self.store_failed(store, source.to_string())
            }
            // The store answers: the outage is over even if the probe is
            // still asleep (it stops at its next turn).
            Ok(_) => self.lock_outage().failing = None,
            Err(_) => {}
        }
        loaded
    }

    /// Records a failure and starts the probe unless one runs (or no
    /// runtime can run it: calls then keep going to the store).
    fn store_failed(&self, store: &'static str, cause: String) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut outage = self.lock_outage();
        outage.failing = Some((store, cause));
        if outage.probing {
            return;
        }
        outage.probing = true;
        let handle = self.clone();
        runtime.spawn(async move { handle.probe().await });
    }

    /// Tries to load a segment at doubling intervals until one is loaded,
    /// the store answers with something other than unavailable, or the
    /// allocator shuts down; the outage ends with it.
    async fn probe(self) {
        let b = &self.0;
        let mut delay = FIRST_PROBE;
        loop {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(b.options.outage_probe_max.max(FIRST_PROBE));
            let _prefetching = b.prefetching.lock().await;
            if b.closed.load(Ordering::Acquire) || self.lock_prefetched().is_some() {
                break;
            }
            match self.load(b.current.loaded_at()).await {
                Ok(segment) => {
                    // The outage ends before the segment is seen: a caller
                    // served from it never reads the store as failing.
                    self.lock_outage().failing = None;
                    *self.lock_prefetched() = Some(segment);
                    tracing::info!(tag = %b.tag, "the segment store answers again");
                    break;
                }
                Err(Error::Unavailable { store, source }) => {
                    tracing::debug!(tag = %b.tag, "probe: store {store} still unavailable: {source}");
                    self.lock_outage().failing = Some((store, source.to_string()));
                }
                Err(e) => {
                    tracing::debug!(tag = %b.tag, "probe: {e}");
                    break;
                }
            }
        }
        *self.lock_outage() = Outage::default();
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
            match handle.load_or_probe(current_loaded_at).await {
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
        if let Err(e) = self.give_back(surplus.range(), surplus.first).await {
            tracing::warn!(tag = %self.0.tag, "could not give a surplus segment back: {e}");
        }
    }

    /// Gives `reserved` back down to `new_max`, unless the store keeps no
    /// version to give back with (then the IDs are skipped, with no round
    /// trip).
    async fn give_back(&self, reserved: Range, new_max: u64) -> Result<bool> {
        let b = &self.0;
        if !b.store.segment_capabilities().give_back {
            tracing::debug!(tag = %b.tag, "unused IDs skipped: the store keeps no version to give them back");
            return Ok(false);
        }
        b.store.give_back(&b.tag, reserved, new_max).await
    }

    /// Reserves a segment with Leaf's dynamic step.
    async fn load(&self, previous_loaded_at: Instant) -> Result<Segment> {
        let b = &self.0;
        let step = b.step.load(Ordering::Relaxed);
        let span = tracing::info_span!(
            "workerid.segment.refill",
            "workerid.tag" = b.tag.as_str(),
            "workerid.step" = step,
            "error.type" = tracing::field::Empty,
        );
        let range = match b
            .store
            .reserve(&b.tag, (step > 0).then_some(step))
            .instrument(span.clone())
            .await
        {
            Ok(range) => range,
            Err(e) => {
                span.record("error.type", e.error_type());
                return Err(e);
            }
        };
        b.meters.loaded();
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
        if step == 0 {
            // The first segment, of the tag's own step.
            b.own_step.store(used, Ordering::Relaxed);
        }
        let own = b.own_step.load(Ordering::Relaxed);
        let min = b.options.min_step.unwrap_or(own).clamp(1, crate::MAX_STEP);
        let max = b.options.max_step.clamp(min, crate::MAX_STEP);
        b.step.store(next.clamp(min, max), Ordering::Relaxed);
        tracing::debug!(parent: &span, tag = %b.tag, first = range.first, last = range.last, "segment loaded");
        let segment = Segment::new(range, b.options.refill_at);
        b.meters.buffered(self.left() + segment.len());
        Ok(segment)
    }

    pub(crate) async fn switch_and_take(&self) -> Result<u64> {
        let b = &self.0;
        loop {
            self.check_open()?;
            if self.lock_prefetched().is_none() {
                self.fail_fast()?;
            }
            let _switching = b.switch.lock().await;
            if let Some(id) = self.take() {
                return Ok(id);
            }
            let waited = self.lock_prefetched().is_none();
            if waited {
                // Both buffers are empty, whether the load below succeeds
                // or not: the gauge says so now, not at the next load.
                b.meters.buffered(0);
            }
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
                None => {
                    // Callers that queued behind a load that failed answer
                    // at once too.
                    self.fail_fast()?;
                    self.load_or_probe(b.current.loaded_at()).await?
                }
            };
            if waited {
                b.stalls.fetch_add(1, Ordering::Relaxed);
                b.all_stalls.fetch_add(1, Ordering::Relaxed);
                b.meters.stalled();
            }
            let replaced = b.current.install(segment);
            b.meters.switched(
                replaced.unclaimed_from.saturating_sub(replaced.first),
                self.left(),
            );
            if let Some(id) = self.take() {
                return Ok(id);
            }
        }
    }

    /// Stops handing out IDs and gives the unused tails back to the store
    /// where nothing was reserved since.
    pub(crate) async fn close(&self) {
        let b = &self.0;
        b.closed.store(true, Ordering::Release);
        let _switching = b.switch.lock().await;
        let _prefetching = b.prefetching.lock().await;
        // Claims every ID not handed out yet, atomically with the fast path.
        let current = b.current.install(Segment::empty());
        let unused_from = current.unclaimed_from;
        b.meters
            .switched(unused_from.saturating_sub(current.first), 0);
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
            Some(next) if has_tail && next.first == current.last + 1 => (next.range(), unused_from),
            Some(next) => (next.range(), next.first),
            None if has_tail => (current_range, unused_from),
            None => return,
        };
        match self.give_back(reserved, new_max).await {
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
