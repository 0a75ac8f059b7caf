//! What the generator keeps for its fast path on the [`SystemClock`]: the
//! operating system's reading up to which the unit of its last claim runs
//! with the lease live, and the values of `last` an increment in that unit
//! may start from. The fast path then compares its reading with one number
//! and the value its increment started from with the unit, converts
//! nothing, and no check before its fetch-and-add waits for the previous
//! one (none reads `last`).
//!
//! [`SystemClock`]: crate::SystemClock

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::reading::unit_start;
use super::Generator;
use crate::SystemClock;

/// What the fast path compares with: where a unit's admitted readings end
/// and its values of `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gate {
    /// The readings below this are admitted: the end of the unit, or the
    /// lease deadline if that comes first; 0 admits none.
    end: u64,
    /// `last` with sequence number 0 in the unit: an increment that
    /// started from here up to the unit's second-to-last sequence number
    /// gave an ID of the unit.
    base: u64,
    /// The clock's wall offset (`SystemClock::os_to_wall`) the end was
    /// worked out with: after a resync it is the old offset's.
    os_to_wall: i64,
}

impl Gate {
    /// The gate that admits nothing.
    pub(crate) const SHUT: Gate = Gate {
        end: 0,
        base: 0,
        os_to_wall: 0,
    };

    /// The gate of the unit whose sequence-0 value of `last` is `base`,
    /// which ends at reading `unit_end` (wrapping, as [`unit_start`] gives
    /// it), for a lease live until reading `deadline` (exclusive), worked
    /// out with the clock's wall offset `os_to_wall`. Readings at or past
    /// the deadline or the unit's end are never admitted, nor any when the
    /// unit ended before the reading's zero.
    ///
    /// There is no lower end: a reading before the unit is one taken
    /// before a claim found the clock in the unit and opened the gate, so
    /// the increment that follows it comes after the clock reached the
    /// unit, and its ID is not ahead of the clock.
    pub(crate) fn new(base: u64, unit_end: u64, deadline: u64, os_to_wall: i64) -> Self {
        // Readings are below 2^63 (292 years after boot): a larger end
        // wrapped below zero.
        let end = if unit_end < 1 << 63 {
            unit_end.min(deadline)
        } else {
            0
        };
        Gate {
            end,
            base,
            os_to_wall,
        }
    }

    /// Whether the fast path may increment `last` at the operating system
    /// reading `os` of a clock whose wall offset is now `os_to_wall`: the
    /// reading is before the unit's end and the deadline, by the offset
    /// the end was worked out with.
    #[inline(always)]
    pub(crate) fn admits_reading(&self, os: u64, os_to_wall: i64) -> bool {
        os < self.end && self.os_to_wall == os_to_wall
    }

    /// Whether an increment of `last` that started from `current` gave an
    /// ID of the unit: `current` is in the unit with a sequence number
    /// left (`seq_limit` is the largest in place) and its worker field
    /// whole. Every other value `last` can take (an earlier or later unit,
    /// a carry out of the sequence, a sealed value) is not. The value the
    /// increment started from, not its result: one step less between the
    /// fetch-and-add and the verdict.
    #[inline(always)]
    pub(crate) fn admits_increment(&self, current: u64, seq_limit: u64) -> bool {
        current.wrapping_sub(self.base) < seq_limit
    }

    /// Whether the gate is open for the unit whose sequence-0 value of
    /// `last` is `base`, by the clock's wall offset `os_to_wall`.
    pub(crate) fn is_open_for(&self, base: u64, os_to_wall: i64) -> bool {
        self.end != 0 && self.base == base && self.os_to_wall == os_to_wall
    }
}

/// The [`Gate`] in memory, each field an atomic of its own, read without a
/// lock. A reader may take fields of two settings of the gate: it loads
/// the end first and an opening stores it last, so the unit and offset it
/// reads are the end's or newer. Each was set by a claim while the lease
/// and the window allowed it, and a call that takes one setting's end and
/// a newer one's unit acts as a call that read its gate before a change
/// and increments after it, as a call in flight across a change of the
/// lease does in any case.
#[derive(Debug)]
pub(crate) struct SystemCell {
    end: AtomicU64,
    base: AtomicU64,
    os_to_wall: AtomicI64,
    /// Held while setting the gate (one writer at a time) and while the
    /// lease changes, so that a gate is never worked out from a lease that
    /// is being replaced (see `Generator::open_gate`).
    setting: Mutex<()>,
}

impl Default for SystemCell {
    fn default() -> Self {
        SystemCell {
            end: AtomicU64::new(Gate::SHUT.end),
            base: AtomicU64::new(Gate::SHUT.base),
            os_to_wall: AtomicI64::new(Gate::SHUT.os_to_wall),
            setting: Mutex::new(()),
        }
    }
}

impl SystemCell {
    /// The gate, its end loaded first.
    #[inline(always)]
    pub(crate) fn gate(&self) -> Gate {
        let end = self.end.load(Ordering::Acquire);
        Gate {
            end,
            base: self.base.load(Ordering::Acquire),
            os_to_wall: self.os_to_wall.load(Ordering::Relaxed),
        }
    }

    /// Held while working out a gate and setting it.
    pub(crate) fn setting(&self) -> MutexGuard<'_, ()> {
        self.setting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the gate; the caller holds [`setting`](SystemCell::setting).
    /// The end is stored last, so a reader that loads it takes the unit
    /// and offset stored with it or newer ones.
    pub(crate) fn set(&self, _setting: &MutexGuard<'_, ()>, gate: Gate) {
        self.base.store(gate.base, Ordering::Release);
        self.os_to_wall.store(gate.os_to_wall, Ordering::Relaxed);
        self.end.store(gate.end, Ordering::Release);
    }

    /// Admits nothing until a claim opens it again.
    pub(crate) fn shut(&self) {
        let setting = self.setting();
        self.set(&setting, Gate::SHUT);
    }
}

impl Generator {
    /// [`increment`](Generator::increment) on the system clock. The gate
    /// the last claim opened ([`open_gate`](Generator::open_gate)) holds
    /// the reading at which that claim's unit ends (or the lease deadline,
    /// if it comes first) and the values of `last` that unit's increments
    /// may start from. The reading is checked
    /// before the increment and the increment's result after it, so that
    /// nothing before the fetch-and-add waits for `last` (which the
    /// previous one changed) or converts the reading. An increment outside
    /// the gate's unit (a carry out of a full sequence, a raised or sealed
    /// `last`, a racing new unit) is given up and shuts the gate, so each
    /// thread gives up at most one increment before a claim judges the
    /// generator's state and opens the gate again.
    #[inline(always)]
    pub(super) fn system_increment(&self, system: &SystemClock) -> Option<u64> {
        let os = SystemClock::os_coarse(self.os_lag);
        let gate = self.system_cell.gate();
        if !gate.admits_reading(os, system.os_to_wall()) {
            return None;
        }
        let (step, seq_limit) = (self.packing.step(), self.packing.seq_limit());
        let current = self.last.fetch_add(step, Ordering::AcqRel);
        if gate.admits_increment(current, seq_limit) {
            return Some(current.wrapping_add(step));
        }
        self.gate_missed();
        None
    }

    #[cold]
    #[inline(never)]
    fn gate_missed(&self) {
        self.system_cell.shut();
    }

    /// Opens the system clock's gate for unit `ts`, in which a claim just
    /// issued (nothing without the system clock's fast path, or when it is
    /// already open for that unit by the clock's current offset). The
    /// window and the deadline are read under the cell's lock, which every
    /// change of the lease holds, with the gate shut, while it changes
    /// them: a gate is worked out from a lease as it was before a change,
    /// and then shut by it, or as it is after it. A unit past the window
    /// opens nothing; the deadline, if it comes before the unit's end, is
    /// the gate's end.
    pub(super) fn open_gate(&self, ts: u64) {
        let Some(system) = &self.system else {
            return;
        };
        let base = self.packing.pack(ts, 0);
        let os_to_wall = system.os_to_wall();
        if self.system_cell.gate().is_open_for(base, os_to_wall) {
            return;
        }
        let setting = self.system_cell.setting();
        if ts > self.window_end.load(Ordering::Acquire) {
            return;
        }
        let to_since = os_to_wall.wrapping_sub(self.epoch_ns as i64);
        let gate = Gate::new(
            base,
            unit_start(ts + 1, to_since, self.span_ns),
            self.os_deadline.load(Ordering::Acquire),
            os_to_wall,
        );
        self.system_cell.set(&setting, gate);
    }
}

#[cfg(test)]
mod tests;
