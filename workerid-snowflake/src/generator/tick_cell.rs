//! What the ticker of a [`TickingClock`](crate::TickingClock) keeps for one
//! generator: the values of `last` the fast path may increment, as of the
//! clock's last tick, so that the fast path compares `last` with one
//! number instead of reading the clock and converting its time.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::packing::in_unit;
use super::{reading::unit_since, Generator, Packing};
use crate::sync::{AtomicU64, Mutex};
use crate::ticking::StoredTime;

/// A generator's view of its ticking clock, set by the ticker at each tick
/// and by the generator at each change of its lease deadline or window.
#[derive(Debug)]
pub(crate) struct TickCell {
    /// `last` with sequence number 0 in the unit of the clock's stored
    /// time, while the lease is live by that time (plus its lag) and the
    /// unit is within the window; `nothing` otherwise.
    unit_base: AtomicU64,
    /// The largest sequence number in place: `last - unit_base` below it is
    /// a value of `last` in the base's unit with a sequence number left.
    seq_limit: u64,
    /// The unit base that admits no value of `last`.
    nothing: u64,
    stored: StoredTime,
    /// The lease deadline in the stored time's terms
    /// ([`StoredTime::deadline`]) and the window's end, as the generator
    /// last set them.
    deadline: AtomicU64,
    window_end: AtomicU64,
    epoch_ns: u64,
    unit_ms: u64,
    packing: Packing,
    /// Held while setting `unit_base`, so that a base worked out from a
    /// deadline or window since replaced never overwrites a newer one.
    setting: Mutex<()>,
}

impl TickCell {
    /// A cell for a generator of `packing`'s layout (its epoch and unit
    /// given in ns and ms), live (no deadline) up to `window_end`, that the
    /// clock's ticker updates from now on.
    pub(crate) fn new(
        stored: StoredTime,
        packing: Packing,
        epoch_ns: u64,
        unit_ms: u64,
        window_end: u64,
    ) -> Arc<Self> {
        let nothing = packing.seq_limit().wrapping_neg();
        let cell = Arc::new(TickCell {
            unit_base: AtomicU64::new(nothing),
            seq_limit: packing.seq_limit(),
            nothing,
            stored,
            deadline: AtomicU64::new(u64::MAX),
            window_end: AtomicU64::new(window_end),
            epoch_ns,
            unit_ms,
            packing,
            setting: Mutex::new(()),
        });
        cell.stored.follow(Arc::downgrade(&cell));
        cell.update();
        cell
    }

    /// The clock's stored time.
    #[inline(always)]
    pub(crate) fn stored(&self) -> &StoredTime {
        &self.stored
    }

    /// Whether `last` may be incremented on the fast path: it is in the
    /// unit of the clock's stored time with a sequence number left, the
    /// lease is live by that time and the unit within the window.
    #[inline(always)]
    pub(crate) fn admits(&self, last: u64) -> bool {
        in_unit(last, self.unit_base(), self.seq_limit)
    }

    /// `last` with sequence number 0 in the current unit, or a value no
    /// such `last` has when nothing is admitted.
    #[inline(always)]
    pub(crate) fn unit_base(&self) -> u64 {
        self.unit_base.load(Ordering::Acquire)
    }

    /// The lease deadline in the stored time's terms: a stored monotonic
    /// time below it is surely before the deadline.
    #[inline]
    pub(crate) fn deadline(&self) -> u64 {
        self.deadline.load(Ordering::Acquire)
    }

    /// Sets the lease deadline (on the clock's monotonic time, ns; 0:
    /// closed) and the window's end, and the unit base from them at once.
    pub(crate) fn set(&self, deadline_mono_ns: u64, window_end: u64) {
        self.deadline
            .store(self.stored.deadline(deadline_mono_ns), Ordering::Release);
        self.window_end.store(window_end, Ordering::Release);
        self.update();
    }

    /// Sets the unit base from the clock's stored time, the deadline and
    /// the window as they are now (what the ticker calls at each tick).
    pub(crate) fn update(&self) {
        let _setting = self.setting.lock().unwrap_or_else(|e| e.into_inner());
        let (mono, wall) = self.stored.read();
        let base = match wall.checked_sub(self.epoch_ns) {
            Some(since) if mono < self.deadline.load(Ordering::Acquire) => {
                let unit = unit_since(since, self.unit_ms);
                if unit <= self.window_end.load(Ordering::Acquire) {
                    self.packing.pack(unit, 0)
                } else {
                    self.nothing
                }
            }
            _ => self.nothing,
        };
        self.unit_base.store(base, Ordering::Release);
    }

    /// Admits nothing until the next update: before the stored time is set
    /// back (a resync of a wall clock that went back), and when the ticker
    /// ends.
    pub(crate) fn shut(&self) {
        let _setting = self.setting.lock().unwrap_or_else(|e| e.into_inner());
        self.unit_base.store(self.nothing, Ordering::Release);
    }
}

impl Generator {
    /// The ticking clock's fast path, on the generator's cell `tick`: the
    /// unit its ticker found, the lease live and the window open, in one
    /// comparison, then the increment; `None` when the cell does not admit
    /// `last`, and when the increment raced past the unit (given up, never
    /// issued).
    #[inline(always)]
    pub(super) fn tick_increment(&self, tick: &TickCell) -> Option<u64> {
        let current = self.last.load(Ordering::Relaxed);
        if !tick.admits(current) {
            // Laid out away from the path through the fetch-and-add, which
            // then runs straight to the caller's use of the ID.
            std::hint::cold_path();
            return None;
        }
        self.fetch_add_in_unit(current)
    }
}

#[cfg(all(test, workerid_loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
