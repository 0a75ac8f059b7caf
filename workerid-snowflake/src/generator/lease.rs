//! What a worker sets on its generator (the lease deadline, the window
//! reserved in the store, the seal when it stops) and the last used
//! timestamp it reads for the store's watermark.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Generator, SEALED};
use crate::sync::MutexGuard;

impl Generator {
    /// The timestamp (in layout units) of the last ID (libx.net/workerid's `LastUsedTimestamp`).
    pub fn last_used_timestamp(&self) -> u64 {
        let last = match self.last.load(Ordering::Acquire) {
            sealed if sealed >= SEALED => self.sealed_last.load(Ordering::Acquire),
            last => last,
        };
        self.packing.ts(last)
    }

    /// Closes the generator for good and returns the timestamp (in layout
    /// units) of the last ID it issued: final even against calls in flight,
    /// whose compare-and-swap or increment of `last` fails from here on.
    /// What a worker leaves for the next holder when it stops.
    pub(crate) fn seal(&self) -> u64 {
        self.close();
        let last = match self.last.swap(SEALED, Ordering::AcqRel) {
            sealed if sealed >= SEALED => self.sealed_last.load(Ordering::Acquire),
            last => last,
        };
        self.sealed_last.store(last, Ordering::Release);
        self.meters.count_unit(
            self.packing.dense(last),
            u32::from(self.layout.sequence_bits()),
        );
        self.packing.ts(last)
    }

    /// Raises the last used timestamp to `ts` (libx.net/workerid's
    /// `SetLastUsedTimestamp`): every later ID of [`next_id`](Self::next_id)
    /// and of every batch a [`LocalGenerator`](crate::LocalGenerator) claims
    /// later has a larger timestamp (a batch claimed before may still be
    /// issued; call it before handing the generator out). Never lowers it.
    /// A `ts` past the layout's largest timestamp raises it to that one,
    /// after which the generator issues no ID.
    pub fn set_last_used_timestamp(&self, ts: u64) {
        let ts = ts.min(self.layout.max_timestamp());
        let floor = self.packing.pack(ts, self.layout.max_sequence());
        self.last.fetch_max(floor, Ordering::AcqRel);
    }

    /// The largest timestamp (in layout units) this generator may use: the
    /// upper end of the time window its worker reserved in the store as the
    /// lease's watermark (the layout's maximum for a generator made with
    /// [`Generator::new`]), as the worker's last renewal that reserved
    /// one set it.
    #[inline]
    pub fn window_end(&self) -> u64 {
        self.window_end.load(Ordering::Acquire)
    }

    /// The lease deadline the generator was last opened until, on its
    /// clock's monotonic time ([`Reading::mono`](crate::Reading::mono)): no
    /// ID is issued at or after it. It stays readable after the generator
    /// closes (stop, lost lease), so an observer can compare the instants of
    /// issued IDs with it. `None` for a generator made with
    /// [`Generator::new`] (no lease, no deadline); zero for a worker's
    /// generator that was never opened.
    pub fn lease_deadline(&self) -> Option<Duration> {
        match self.opened_until_ns.load(Ordering::Acquire) {
            u64::MAX => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// Lets the generator issue IDs until the clock's monotonic time reaches
    /// `deadline` and with timestamps up to `window_end` (inclusive), and
    /// never past the layout's last unit.
    pub(crate) fn open_until(&self, deadline: Duration, window_end: u64) {
        let _changing = self.changing_lease();
        let window_end = window_end.min(self.layout.max_timestamp());
        self.window_end.store(window_end, Ordering::Release);
        let deadline = u64::try_from(deadline.as_nanos())
            .unwrap_or(u64::MAX)
            .clamp(1, u64::MAX - 1);
        self.opened_until_ns.store(deadline, Ordering::Release);
        self.set_deadline(deadline);
    }

    /// Stops issuing IDs, at once.
    pub(crate) fn close(&self) {
        let _changing = self.changing_lease();
        self.set_deadline(0);
    }

    /// Held while the deadline or the window changes: a close and an
    /// opening that race end in the order they took it, every fast path's
    /// gate included (each is set in steps). It also holds the system
    /// clock's gate shut, so that no fast path goes on with the window and
    /// deadline being replaced and no claim opens the gate from them; the
    /// next claim opens it from the new ones.
    fn changing_lease(&self) -> (MutexGuard<'_, ()>, MutexGuard<'_, ()>) {
        let changing = self
            .changing_lease
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let gate = self.system_cell.setting();
        self.system_cell.shut(&gate);
        (changing, gate)
    }

    /// The deadline in every term a fast path compares with; closing makes
    /// the fast paths fail first, opening makes them pass last.
    fn set_deadline(&self, deadline: u64) {
        let os = self.system.as_ref().map_or(0, |s| s.os_deadline(deadline));
        let window_end = self.window_end.load(Ordering::Acquire);
        if deadline == 0 {
            if let Some(tick) = &self.tick {
                tick.set(deadline, window_end);
            }
            self.os_deadline.store(os, Ordering::Release);
            self.deadline_ns.store(deadline, Ordering::Release);
        } else {
            self.deadline_ns.store(deadline, Ordering::Release);
            self.os_deadline.store(os, Ordering::Release);
            if let Some(tick) = &self.tick {
                tick.set(deadline, window_end);
            }
        }
    }
}
