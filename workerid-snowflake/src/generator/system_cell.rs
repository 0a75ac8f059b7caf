//! What the generator keeps for its fast path on the [`SystemClock`]: the
//! operating system's reading up to which the unit of its last claim runs
//! with the lease live, and the values of `last` an increment in that unit
//! may start from. The fast path then compares its reading with one number
//! and the value its increment started from with the unit, converts
//! nothing, and no check before its fetch-and-add waits for the previous
//! one (none reads `last`).
//!
//! [`SystemClock`]: crate::SystemClock

use std::sync::atomic::Ordering;
use std::sync::TryLockError;

use super::packing::in_unit;
use super::reading::unit_start;
use super::Generator;
use crate::sync::{AtomicI64, AtomicU64, Mutex, MutexGuard};
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
    /// There is no lower end: a gate is opened only once a precise reading,
    /// by the offset it was worked out with, has reached the unit (see
    /// [`open_gate`](Generator::open_gate)), so a reading below the unit
    /// was taken before that, and the increment that follows it comes
    /// after the clock reached the unit: its ID is not ahead of the clock.
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
        in_unit(current, self.base, seq_limit)
    }

    /// Whether the gate is open for the unit whose sequence-0 value of
    /// `last` is `base`, by the clock's wall offset `os_to_wall`.
    pub(crate) fn is_open_for(&self, base: u64, os_to_wall: i64) -> bool {
        self.end != 0 && self.base == base && self.os_to_wall == os_to_wall
    }
}

/// The [`Gate`] in memory, each field an atomic of its own, read without a
/// lock. A reader loads the end first (acquire) and an opening stores it
/// last (release), so the unit and offset a reader takes are those stored
/// with the end it took, or newer ones. Shutting stores the end alone, so
/// every unit a reader can take is one a gate was opened for: opened while
/// the lease and the window allowed it, and after the clock reached it. A
/// reader that takes an end with a newer unit acts as a call that read its
/// gate before the newer opening (or a change of the lease) and increments
/// after it, as a call in flight across it does in any case. The unit's
/// value is also stored with release after the claim's compare-and-swap
/// and loaded with acquire, so the increment that follows starts from that
/// claim's value of `last` or a later one.
#[derive(Debug)]
pub(crate) struct SystemCell {
    end: AtomicU64,
    base: AtomicU64,
    os_to_wall: AtomicI64,
    /// Held while opening the gate (one writer at a time) and while the
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

    /// Held while the lease changes, and while opening the gate.
    pub(crate) fn setting(&self) -> MutexGuard<'_, ()> {
        self.setting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`setting`](SystemCell::setting) if no one holds it: a claim that
    /// finds it held leaves the gate as it is (shut, or open for a unit a
    /// claim opened), so the fast path never waits for a lock.
    pub(crate) fn try_setting(&self) -> Option<MutexGuard<'_, ()>> {
        match self.setting.try_lock() {
            Ok(setting) => Some(setting),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Opens `gate`; the caller holds [`setting`](SystemCell::setting).
    pub(crate) fn open(&self, _setting: &MutexGuard<'_, ()>, gate: Gate) {
        self.base.store(gate.base, Ordering::Release);
        self.os_to_wall.store(gate.os_to_wall, Ordering::Relaxed);
        self.end.store(gate.end, Ordering::Release);
    }

    /// Admits nothing until a claim opens it again; the caller holds
    /// [`setting`](SystemCell::setting).
    pub(crate) fn shut(&self, _setting: &MutexGuard<'_, ()>) {
        self.end.store(0, Ordering::Release);
    }

    /// Shuts the gate a call read, whose end was `seen_end`, unless it has
    /// been shut or replaced since (then the newer gate stays): without the
    /// lock, as the fast path does.
    pub(crate) fn shut_seen(&self, seen_end: u64) {
        let _ = self
            .end
            .compare_exchange(seen_end, 0, Ordering::Release, Ordering::Relaxed);
    }
}

impl Generator {
    /// [`increment`](Generator::increment) on the system clock, the
    /// increment's value handed to `issued` and every other outcome to
    /// `refused` (each given the generator), so that the ID and the claim
    /// that follow a refusal are made in it. The gate the last claim
    /// opened ([`open_gate`](Generator::open_gate)) holds the reading at
    /// which that claim's unit ends (or the lease deadline, if it comes
    /// first) and the values of `last` that unit's increments may start
    /// from. The reading is checked before the increment and the value it
    /// started from after it, so that nothing before the fetch-and-add
    /// waits for `last` (which the previous one changed) or converts the
    /// reading. The unit's last number and every increment outside the
    /// gate's unit shut the gate ([`gate_closing`](Generator::gate_closing)).
    ///
    /// Inlined into its caller, it keeps no value in a register across a
    /// call: the clock read ([`os_coarse_keeping`](SystemClock::os_coarse_keeping))
    /// hands the generator and the clock back from memory, and every later
    /// call is the last thing done. A caller that inlines it beside the
    /// ticking clock's path (as an inlined `next_id` does; an out-of-line
    /// copy keeps the address its `Result` is returned to) then saves no
    /// register on the stack on entry, which that path's locked instruction
    /// would wait for, and the system clock's path makes no call but the
    /// clock's.
    #[inline(always)]
    pub(super) fn system_increment<R>(
        &self,
        issued: impl FnOnce(&Self, u64) -> R,
        refused: impl FnOnce(&Self) -> R,
    ) -> R {
        let Some(system) = self.system.as_deref() else {
            return refused(self);
        };
        let (os, (this, system)) = SystemClock::os_coarse_keeping(self.os_source, (self, system));
        let gate = this.system_cell.gate();
        if !gate.admits_reading(os, system.os_to_wall()) {
            return refused(this);
        }
        let step = this.packing.step();
        let current = this.last.fetch_add(step, Ordering::AcqRel);
        let next = current.wrapping_add(step);
        // Every number of the unit but its last.
        if gate.admits_increment(current, this.packing.seq_limit_but_last()) {
            return issued(this, next);
        }
        this.gate_closing(gate.end, gate.base, current, next, issued, refused)
    }

    /// Shuts the gate whose end a call of
    /// [`system_increment`](Generator::system_increment) read, after the
    /// unit's last number, which that call issues, so that no call carries
    /// `last` out of the full unit; or after an increment outside the
    /// gate's unit (a raised or sealed `last`, a racing new unit, a carry
    /// by a call that raced the last number), which it gives up. Each
    /// thread gives up at most one increment to a gate before a claim
    /// judges the generator's state and opens the gate again. Hands the
    /// increment's value to `issued` if it was the unit's last number, and
    /// otherwise calls `refused`. Out of line and given the gate's fields
    /// by value, so that the fast path keeps nothing of the gate in memory
    /// for it, nor any value across the call.
    #[cold]
    #[inline(never)]
    fn gate_closing<R>(
        &self,
        end: u64,
        base: u64,
        current: u64,
        next: u64,
        issued: impl FnOnce(&Self, u64) -> R,
        refused: impl FnOnce(&Self) -> R,
    ) -> R {
        self.system_cell.shut_seen(end);
        if in_unit(current, base, self.packing.seq_limit()) {
            issued(self, next)
        } else {
            refused(self)
        }
    }

    /// Opens the system clock's gate for the unit of `last`, the value a
    /// claim just set it to. Nothing when:
    /// - there is no system clock's fast path;
    /// - the unit is full (`last` holds its last number) or past the window;
    /// - the gate is already open for the unit by the clock's current offset;
    /// - a precise reading by that offset is still before the unit (a
    ///   resync moved the clock back since the claim read it), which keeps
    ///   the gate's missing lower end sound;
    /// - another claim or a change of the lease holds the cell's lock (a
    ///   claim never waits for it).
    ///
    /// The window and the deadline are read under that lock, which every
    /// change of the lease holds, with the gate shut, while it changes
    /// them: a gate is worked out from a lease as it was before a change,
    /// and then shut by it, or as it is after it. The deadline, if it comes
    /// before the unit's end, is the gate's end.
    pub(super) fn open_gate(&self, last: u64) {
        let Some(system) = &self.system else {
            return;
        };
        if !self.packing.issuable(last) {
            return;
        }
        let ts = self.packing.ts(last);
        let base = self.packing.pack(ts, 0);
        let os_to_wall = system.os_to_wall();
        if self.system_cell.gate().is_open_for(base, os_to_wall) {
            return;
        }
        let Some(setting) = self.system_cell.try_setting() else {
            return;
        };
        let to_since = os_to_wall.wrapping_sub(self.epoch_ns as i64);
        let start = unit_start(ts, to_since, self.span_ns);
        // As signed readings: a start that wrapped below zero has begun.
        let begun = SystemClock::os_coarse(0) as i64 >= start as i64;
        if !begun || ts > self.window_end.load(Ordering::Acquire) {
            return;
        }
        let gate = Gate::new(
            base,
            unit_start(ts + 1, to_since, self.span_ns),
            self.os_deadline.load(Ordering::Acquire),
            os_to_wall,
        );
        self.system_cell.open(&setting, gate);
    }
}

#[cfg(all(test, workerid_loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
