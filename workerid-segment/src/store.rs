//! The segment store: per-tag counters that hand out ranges of IDs.

use std::fmt;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use crate::{Error, Result};

/// The longest tag, in bytes (go-id-alloc's `biz_tag varchar(32)`; Leaf's
/// column takes 128).
pub const MAX_TAG_LEN: usize = 32;

/// The largest ID a segment store hands out (IDs fit a signed 64-bit column).
pub const MAX_SEGMENT_ID: u64 = i64::MAX as u64;

/// A business tag (Leaf's `biz_tag`): 1 to 32 bytes of `[A-Za-z0-9._:-]`.
///
/// ```
/// use workerid_segment::Tag;
/// assert!(Tag::new("orders").is_ok());
/// assert!(Tag::new("no spaces").is_err());
/// let long = "x".repeat(4096);
/// assert!(!Tag::new(long.as_str()).unwrap_err().to_string().contains(&long));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(String);

impl Tag {
    /// Validates `name`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when it is empty, longer than 32 bytes, or has
    /// a character outside `[A-Za-z0-9._:-]`.
    pub fn new(name: impl Into<String>) -> Result<Tag> {
        let name = name.into();
        let ok = (1..=MAX_TAG_LEN).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if ok {
            Ok(Tag(name))
        } else if name.len() > MAX_TAG_LEN {
            // Not quoted: a name sent by a client may be of any size.
            Err(Error::invalid_config(format!(
                "a tag of {} bytes is too long: a tag is 1 to {MAX_TAG_LEN} bytes of [A-Za-z0-9._:-]",
                name.len()
            )))
        } else {
            Err(Error::invalid_config(format!(
                "tag {name:?} must be 1 to {MAX_TAG_LEN} bytes of [A-Za-z0-9._:-]"
            )))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tag({:?})", self.0)
    }
}

/// IDs `first..=last`, reserved for one process.
///
/// A tag's `max_id` is the first ID not handed out yet; a reservation of
/// `step` IDs moves it to `max_id + step` and takes `[max_id, max_id + step)`
/// (the rule of go-id-alloc and Leaf, so that their servers and these can
/// share one table). ID 0 may be part of a range (a tag that starts at 0, as
/// go-id-alloc's rows do); the allocators never hand it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The first ID: the tag's `max_id` before the reservation.
    pub first: u64,
    /// The last ID (inclusive): the tag's `max_id` after the reservation,
    /// minus one.
    pub last: u64,
    /// The tag's version after the reservation, opaque: every reservation of
    /// the tag changes it to a value it never had, so a give-back that
    /// carries it is refused once anything was reserved since, even when
    /// `max_id` came back to [`end`](Range::end) meanwhile. A store without
    /// give-backs ([`SegmentCapabilities::give_back`] false) keeps none: 0.
    pub version: u64,
}

impl Range {
    /// The range a reservation of `step` IDs took when it moved the tag's
    /// `max_id` to `max_id`: `[max_id - step, max_id)`, or `None` when that
    /// is no range (a step of 0, or more than `max_id`).
    ///
    /// ```
    /// use workerid_segment::Range;
    /// let range = Range::below(1_100, 100, 7).unwrap();
    /// assert_eq!((range.first, range.last, range.end()), (1_000, 1_099, 1_100));
    /// assert!(Range::below(5, 10, 1).is_none());
    /// ```
    pub fn below(max_id: u64, step: u64, version: u64) -> Option<Range> {
        if step == 0 || step > max_id {
            return None;
        }
        Some(Range {
            first: max_id - step,
            last: max_id - 1,
            version,
        })
    }

    /// The tag's `max_id` right after this reservation: the first ID above
    /// the range.
    pub fn end(&self) -> u64 {
        self.last + 1
    }

    /// How many IDs.
    pub fn len(&self) -> u64 {
        (self.last + 1).saturating_sub(self.first)
    }

    /// Never: a range holds at least one ID.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A tag as a store lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagInfo {
    /// The tag.
    pub tag: Tag,
    /// The first ID not handed out yet: the next range starts there.
    pub max_id: u64,
    /// The tag's default step.
    pub step: u64,
}

/// What a [`SegmentStore`] can do, as it declares it (the way
/// [`Capabilities`](workerid_core::Capabilities) does for leases): callers check it
/// instead of finding out by failing.
///
/// ```
/// use workerid_segment::SegmentCapabilities;
/// // A store that implements `list_tags` says so; the rest is the default.
/// let caps = SegmentCapabilities { durable: true, list: true, ..SegmentCapabilities::default() };
/// assert!(caps.gapless && caps.give_back);
/// assert!(!SegmentCapabilities::default().list);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentCapabilities {
    /// Whether reserved ranges survive a restart of the store (default
    /// false: say true only when it is so). A service must not hand out
    /// IDs from a store that forgets them.
    pub durable: bool,
    /// Whether one-ID reservations come back consecutive, so that a
    /// [`GaplessSequence`](crate::GaplessSequence) can run on the store
    /// (default true: every atomic counter does).
    pub gapless: bool,
    /// Whether [`SegmentStore::list_tags`] is implemented (default false, as
    /// the method's default answers [`Error::Unsupported`]).
    pub list: bool,
    /// Whether [`SegmentStore::give_back`] can return IDs (default true).
    /// False on a table kept without the version column a give-back
    /// compares: unused tails are then skipped, never reused.
    pub give_back: bool,
}

impl Default for SegmentCapabilities {
    fn default() -> Self {
        SegmentCapabilities {
            durable: false,
            gapless: true,
            list: false,
            give_back: true,
        }
    }
}

/// A store of per-tag counters (Leaf-segment's `segments` table).
///
/// # Contract
/// - A tag's `max_id` is the first ID not handed out yet; a reservation of
///   `step` IDs takes `[max_id, max_id + step)` and moves `max_id` up by
///   `step` ([`Range::below`]), as go-id-alloc's and Leaf's servers do.
/// - `reserve` is atomic: concurrent reservations on one tag, from any number
///   of processes, get ranges that never overlap, and together have no holes.
/// - A range handed out is never handed out again, not even after a restart
///   of a durable store (only [`give_back`](SegmentStore::give_back) returns
///   IDs, and only while nothing was reserved since).
/// - Inputs are checked by the caller: the tag is valid, steps are in
///   `1..=2^40` ([`check_step`]), and a new tag's first range fits
///   ([`check_first_range`]).
#[async_trait]
pub trait SegmentStore: Debug + Send + Sync + 'static {
    /// What this store can do (named apart from
    /// [`LeaseStore::capabilities`](workerid_core::LeaseStore::capabilities), since
    /// most stores are both).
    fn segment_capabilities(&self) -> SegmentCapabilities;

    /// Creates `tag` so that its first ID is `first_id` and its default step
    /// `step`.
    ///
    /// # Behavior
    /// - A new tag: created with `max_id = first_id`, true; its first
    ///   reservation starts at `first_id`.
    /// - A tag that exists: false, and nothing changes (not its counter,
    ///   not its step).
    /// - Atomic: of processes creating one tag at once, exactly one gets
    ///   true.
    ///
    /// # Errors
    /// The store's own when it cannot be reached.
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool>;

    /// Reserves the next `step` IDs of `tag` (`None`: the tag's default step).
    ///
    /// # Behavior
    /// - `[max_id, max_id + step)`, and `max_id` moves to `max_id + step`.
    /// - The range carries the tag's new version, which
    ///   [`give_back`](SegmentStore::give_back) compares.
    /// - Unknown tag: [`Error::UnknownTag`].
    /// - When `max_id + step` would pass [`MAX_SEGMENT_ID`]: [`Error::TagExhausted`].
    ///
    /// # Errors
    /// [`Error::UnknownTag`], [`Error::TagExhausted`], or the store's own
    /// when it cannot be reached.
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range>;

    /// Sets `tag`'s `max_id` to `new_max`, the first ID not handed out, if
    /// nothing was reserved or given back since `reserved` was; returns
    /// whether it did.
    ///
    /// # Behavior
    /// - Done only while the tag's `max_id` is still `reserved.end()` and its
    ///   version still `reserved.version`, and moves the version on, as a
    ///   reservation does: a give-back sent again (a retry after a lost
    ///   answer) is refused once another reservation happened, even one
    ///   that was given back to the same `max_id` (no ABA), or one by a
    ///   server that knows no version (go-id-alloc, Leaf), which raises
    ///   `max_id` back to `reserved.end()` when it reserves what was given
    ///   back, and leaves the version as the give-back left it.
    /// - `new_max` above `reserved.end()`: refused (false), nothing changes.
    /// - `new_max` at `reserved.end()` (nothing to give back) is a
    ///   give-back like any other: taken, it moves the version on.
    /// - `new_max` may be below `reserved.first`, to give back the tail of
    ///   an earlier range too when nothing was reserved between the two.
    /// - A store that keeps no version (see
    ///   [`SegmentCapabilities::give_back`]) refuses every give-back.
    /// - Unknown tag: [`Error::UnknownTag`], whatever else the call has
    ///   wrong (a `new_max` above `reserved.end()` too), so that a refused
    ///   give-back still tells whether the tag exists.
    ///
    /// # Errors
    /// [`Error::UnknownTag`], or the store's own when it cannot be reached.
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool>;

    /// Every tag, with its `max_id` and default step. Optional: only when
    /// [`SegmentCapabilities::list`] is true.
    ///
    /// # Behavior
    /// - Ordered by name; it changes nothing.
    /// - Default: [`Error::Unsupported`] (not retryable).
    ///
    /// # Errors
    /// The store's own when it cannot be reached.
    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        Err(Error::Unsupported {
            operation: "list_tags",
        })
    }
}

/// `Arc<S>` and `Box<S>` forward every method, so that a wrapper cannot
/// silently miss one.
macro_rules! forward_segment_store {
    ($($wrapper:ty),+) => {$(
        #[async_trait]
        impl<S: SegmentStore + ?Sized> SegmentStore for $wrapper {
            fn segment_capabilities(&self) -> SegmentCapabilities {
                (**self).segment_capabilities()
            }
            async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
                (**self).create_tag(tag, first_id, step).await
            }
            async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
                (**self).reserve(tag, step).await
            }
            async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
                (**self).give_back(tag, reserved, new_max).await
            }
            async fn list_tags(&self) -> Result<Vec<TagInfo>> {
                (**self).list_tags().await
            }
        }
    )+};
}

forward_segment_store!(Arc<S>, Box<S>);

/// The largest step: 2^40 IDs at once.
pub const MAX_STEP: u64 = 1 << 40;

/// Checks a step: `1..=2^40`.
///
/// # Errors
/// [`Error::InvalidConfig`] otherwise.
pub fn check_step(step: u64) -> Result<()> {
    if (1..=MAX_STEP).contains(&step) {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "step {step} must be in 1..={MAX_STEP}"
        )))
    }
}

/// Checks a new tag's first ID and step: a first ID of at least 1, and a
/// first reservation that leaves `max_id` at or below [`MAX_SEGMENT_ID`]
/// (`first_id + step <= MAX_SEGMENT_ID`), as every store requires of a
/// reservation: a tag whose first one cannot be made would never serve an
/// ID.
///
/// ```
/// use workerid_segment::{check_first_range, MAX_SEGMENT_ID};
/// assert!(check_first_range(1, 1000).is_ok());
/// assert!(check_first_range(MAX_SEGMENT_ID - 1, 1).is_ok());
/// assert!(check_first_range(MAX_SEGMENT_ID, 1).is_err());
/// assert!(check_first_range(MAX_SEGMENT_ID - 999, 1000).is_err());
/// assert!(check_first_range(0, 10).is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidConfig`] naming both values otherwise.
pub fn check_first_range(first_id: u64, step: u64) -> Result<()> {
    if first_id == 0 || first_id > MAX_SEGMENT_ID {
        return Err(Error::invalid_config(format!(
            "first ID {first_id} must be in 1..={MAX_SEGMENT_ID}"
        )));
    }
    if first_id > MAX_SEGMENT_ID.saturating_sub(step) {
        return Err(Error::invalid_config(format!(
            "first ID {first_id} and step {step} pass the largest ID {MAX_SEGMENT_ID}: \
             the first range would not fit"
        )));
    }
    Ok(())
}
