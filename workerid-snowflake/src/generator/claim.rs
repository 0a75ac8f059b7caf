//! The generator's claim: every check of `next_id` from a reading of the
//! clock, the waits for a full sequence and a clock that went back a
//! little, and the compare-and-swap that starts a new unit. Every path
//! that cannot take the common case in one increment ends here.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Generator, SEALED};
use crate::{Clock, CoarseNanos, NextIdError};

impl Generator {
    /// Claims up to `want` (at least 1) consecutive sequence numbers of one
    /// timestamp in one compare-and-swap: `(timestamp, first sequence,
    /// count)`, with every check of [`next_id`](Generator::next_id).
    #[inline]
    pub(crate) fn claim(&self, want: u64) -> Result<(u64, u64, u64), NextIdError> {
        let packing = &self.packing;
        let max_seq = self.layout.max_sequence();
        // The coarse clock first (a few ns); the precise one where being up
        // to `behind` late could matter: near the deadline, when the
        // sequence of the last ID's unit is exhausted, and when even
        // `behind` later would still be before the last ID's unit (a clock
        // that went back).
        let mut precise = false;
        loop {
            let now = if precise {
                CoarseNanos::exact(self.clock.now())
            } else {
                self.coarse()
            };
            let deadline = self.deadline_ns.load(Ordering::Acquire);
            if now.mono.saturating_add(now.behind) >= deadline {
                if now.behind != 0 {
                    precise = true;
                    continue;
                }
                return Err(past_deadline(deadline));
            }
            if now.wall < self.epoch_ns {
                return Err(self.too_large(self.layout.epoch() - Duration::from_nanos(now.wall)));
            }
            let now_ts = self.unit_at(now.wall);
            if now_ts > self.seen.load(Ordering::Acquire) {
                self.seen.fetch_max(now_ts, Ordering::AcqRel);
            }
            let current = self.last.load(Ordering::Acquire);
            if current >= SEALED {
                // Sealed after this call checked the deadline.
                return Err(NextIdError::NotReady {
                    reason: "the worker has stopped",
                });
            }
            let (last_ts, seq) = (packing.ts(current), packing.seq(current));
            let (ts, next_seq) = if now_ts > last_ts {
                (now_ts, 0)
            } else if seq < max_seq
                && (now_ts == last_ts
                    || (last_ts <= self.unit_at(now.wall.saturating_add(now.behind))
                        && last_ts <= self.seen.load(Ordering::Acquire)))
            {
                // The last ID's unit, when the clock is surely in it or past
                // it. A coarse reading a few ms behind the precise one that
                // set `last` lands here too: sending it to the precise clock
                // would keep a busy generator on two clock reads per ID
                // (every precise ID moves `last` ahead of the coarse clock).
                // `seen` tells such a unit from one that an increment
                // carried into before any clock reached it.
                (last_ts, seq + 1)
            } else if now.behind != 0 {
                precise = true;
                continue;
            } else if last_ts <= now_ts + 1 {
                // Sequence exhausted (or carried by a racing increment into
                // the next unit): wait for the next unit, never wrap.
                let next = self.layout.time_of(now_ts + 1);
                self.meters.sequence_wait();
                self.clock.sleep(
                    next.saturating_sub(Duration::from_nanos(now.wall))
                        .max(Duration::from_micros(1)),
                );
                continue;
            } else {
                let drift = self
                    .layout
                    .time_of(last_ts)
                    .saturating_sub(Duration::from_nanos(now.wall));
                if drift >= self.drift.give_up_at {
                    return Err(self.too_large(drift));
                }
                if drift >= self.drift.block_below {
                    self.meters.drift_try_later();
                    return Err(NextIdError::ClockDriftTryLater { drift });
                }
                self.meters.drift_waited();
                self.clock.sleep(drift);
                continue;
            };
            if ts > self.window_end.load(Ordering::Acquire) {
                return Err(window_ran_out());
            }
            let count = want.clamp(1, max_seq - next_seq + 1);
            let next = packing.pack(ts, next_seq + count - 1);
            if self
                .last
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.open_gate(next);
                if ts != last_ts {
                    self.meters.new_unit(
                        packing.dense(current),
                        packing.dense(packing.pack(ts, next_seq)),
                        u32::from(self.layout.sequence_bits()),
                    );
                }
                return Ok((ts, next_seq, count));
            }
        }
    }

    /// Whether [`next_id`](Generator::next_id) would issue an ID now, by
    /// a precise reading of the clock, without taking one (no sequence
    /// number is used, no wait, no leaving): what a readiness probe asks.
    ///
    /// # Errors
    /// The error `next_id` would answer: [`NextIdError::NotReady`] when
    /// closed or sealed, past the lease deadline or past the reserved
    /// window; [`NextIdError::ClockDriftTryLater`] and
    /// [`NextIdError::ClockDriftTooLarge`] for a clock behind the last ID
    /// by at least `block_below` or `give_up_at`.
    pub fn readiness(&self) -> Result<(), NextIdError> {
        let now = CoarseNanos::exact(self.clock.now());
        let deadline = self.deadline_ns.load(Ordering::Acquire);
        if now.mono >= deadline {
            return Err(past_deadline(deadline));
        }
        let current = self.last.load(Ordering::Acquire);
        if current >= SEALED {
            return Err(NextIdError::NotReady {
                reason: "the worker has stopped",
            });
        }
        if now.wall < self.epoch_ns {
            let drift = self.layout.epoch() - Duration::from_nanos(now.wall);
            return Err(NextIdError::ClockDriftTooLarge { drift });
        }
        let (now_ts, last_ts) = (self.unit_at(now.wall), self.packing.ts(current));
        if last_ts > now_ts {
            let drift = self
                .layout
                .time_of(last_ts)
                .saturating_sub(Duration::from_nanos(now.wall));
            if drift >= self.drift.give_up_at {
                return Err(NextIdError::ClockDriftTooLarge { drift });
            }
            if drift >= self.drift.block_below {
                return Err(NextIdError::ClockDriftTryLater { drift });
            }
        }
        if now_ts.max(last_ts) > self.window_end.load(Ordering::Acquire) {
            return Err(window_ran_out());
        }
        Ok(())
    }

    /// The clock's coarse reading.
    #[inline]
    fn coarse(&self) -> CoarseNanos {
        if let Some(system) = &self.system {
            return system.now_coarse_nanos();
        }
        self.clock.now_coarse_nanos()
    }

    /// The time unit of a wall time in nanoseconds (0 before the epoch).
    #[inline]
    pub(super) fn unit_at(&self, wall_ns: u64) -> u64 {
        self.unit_since(wall_ns.saturating_sub(self.epoch_ns))
    }

    fn too_large(&self, drift: Duration) -> NextIdError {
        self.meters.drift_too_large();
        if let Some(leave) = &self.leave {
            if !self.left.swap(true, Ordering::AcqRel) {
                leave.notify_one();
            }
        }
        NextIdError::ClockDriftTooLarge { drift }
    }
}

/// Why no ID can be issued at the lease deadline `deadline` (0: closed).
#[cold]
fn past_deadline(deadline: u64) -> NextIdError {
    let reason = if deadline == 0 {
        "no live lease (starting, stopped, or lost)"
    } else {
        "the lease deadline passed before a renewal succeeded \
         (the store is unreachable or answers late)"
    };
    NextIdError::NotReady { reason }
}

/// Why no ID can be issued past the reserved window.
#[cold]
fn window_ran_out() -> NextIdError {
    NextIdError::NotReady {
        reason: "the time window reserved in the store ran out (renewals are late)",
    }
}
