//! A per-thread handle on a shared generator: batches of sequence numbers
//! claimed in one compare-and-swap, every ID still checked against the lease.

use std::sync::Arc;

use super::Generator;
use crate::generator::TickCell;
use crate::{Error, NextIdError, Result};

/// A handle for one thread (or task) that claims sequence numbers from a
/// shared [`Generator`] in batches, so most IDs cost a clock read and no
/// atomic read-modify-write.
///
/// What stays the same as [`Generator::next_id`]:
/// - every ID is unique across all handles and the shared generator;
/// - every ID is checked on the clock against the lease deadline, the
///   reserved window and closing, as the shared path checks it: a stopped or
///   lost worker issues nothing more from a handle either, batch or not;
/// - a clock that went back is met by the drift policy: a batch is issued
///   from only while the clock, give or take the coarse clock's lag, is in
///   the batch's time unit;
/// - the IDs of one handle rise strictly, and a new time unit starts a new
///   batch.
///
/// What differs: IDs of *different* handles are not ordered with each
/// other within a few milliseconds (a time unit, or the coarse clock's lag):
/// a handle may issue an ID below one that another handle, or `next_id`,
/// has already issued. Use the shared [`Generator::next_id`] where every ID
/// must exceed every ID issued before it; use a handle where throughput
/// matters more.
///
/// Sequence numbers left in a batch when its unit ends are skipped, never
/// reused: a unit of the layout's `capacity` sequence numbers holds at
/// least `capacity / batch` batches, whichever handles claim them.
///
/// ```
/// use std::sync::Arc;
/// use workerid_snowflake::{Generator, Layout};
/// let shared = Arc::new(Generator::with_system_clock(Layout::classic(), 7).unwrap());
/// let mut local = shared.local(32).unwrap();
/// let a = local.next_id().unwrap();
/// let b = local.next_id().unwrap();
/// assert!(b > a);
/// assert!(shared.next_id().unwrap() > a, "the shared path goes past claimed batches");
/// ```
#[derive(Debug)]
pub struct LocalGenerator {
    shared: Arc<Generator>,
    batch: u64,
    /// The timestamp of the batch in hand.
    ts: u64,
    /// The batch's next sequence number and its end (exclusive).
    next: u64,
    end: u64,
    /// The batch's ID with sequence number 0, and the shift that puts a
    /// sequence number in place: an ID is `base | seq << seq_shift`.
    base: u64,
    seq_shift: u32,
    /// On a ticking clock: what its ticker keeps for the shared generator,
    /// and the unit base it has while the batch's unit is current.
    tick: Option<Arc<TickCell>>,
    unit_base: u64,
}

impl Generator {
    /// A handle that claims `batch` sequence numbers at a time (16 to 64 is
    /// plenty; a batch larger than what is left of a time unit's sequence
    /// range gets what is left).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a batch of 0.
    pub fn local(self: &Arc<Self>, batch: u32) -> Result<LocalGenerator> {
        if batch == 0 {
            return Err(Error::invalid_config("a local batch of 0 sequence numbers"));
        }
        Ok(LocalGenerator {
            shared: self.clone(),
            batch: u64::from(batch),
            ts: 0,
            next: 0,
            end: 0,
            base: 0,
            seq_shift: self.layout().shifts().1,
            tick: self.tick_cell().cloned(),
            unit_base: 0,
        })
    }
}

impl LocalGenerator {
    /// The next ID: from the batch in hand while its time unit is current
    /// and the lease surely live, else from a new batch.
    ///
    /// # Errors
    /// As [`Generator::next_id`]: [`NextIdError::NotReady`] when closed, past the
    /// lease deadline or past the reserved window; the drift errors.
    #[inline(always)]
    pub fn next_id(&mut self) -> Result<u64, NextIdError> {
        if self.next < self.end {
            // On a ticking clock: the batch's unit is the one its ticker
            // found, the lease live and the window open.
            if let Some(tick) = &self.tick {
                if tick.unit_base() == self.unit_base {
                    return Ok(self.issue());
                }
            }
            if let Some((since, behind)) = self.shared.live_since_epoch() {
                // The batch's unit must be the coarse reading's, or ahead of
                // it by no more than the coarse clock's lag (it was claimed
                // on a precise reading). Further ahead is a clock that went
                // back: `claim` applies the drift policy.
                let now_ts = self.shared.unit_since(since);
                let in_unit = now_ts == self.ts
                    || (now_ts < self.ts
                        && self.ts <= self.shared.unit_since(since.saturating_add(behind)));
                if in_unit && self.ts <= self.shared.window_end() {
                    return Ok(self.issue());
                }
            }
        }
        self.refill()
    }

    /// The batch's next ID (there is one).
    #[inline(always)]
    fn issue(&mut self) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.base | seq << self.seq_shift
    }

    #[cold]
    fn refill(&mut self) -> Result<u64, NextIdError> {
        // Nothing of the old batch may be issued after a failed claim.
        self.end = self.next;
        let (ts, seq, count) = self.shared.claim(self.batch)?;
        (self.ts, self.next, self.end) = (ts, seq + 1, seq + count);
        self.base = self.shared.layout().compose(ts, self.shared.worker_id(), 0);
        self.unit_base = self.shared.unit_base(ts);
        Ok(self.base | seq << self.seq_shift)
    }

    /// The shared generator.
    pub fn generator(&self) -> &Arc<Generator> {
        &self.shared
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use std::sync::atomic::Ordering;

    use crate::clock::LaggingClock;
    use crate::{Clock, FakeClock, Layout};

    const T0: Duration = Duration::from_secs(1_800_000_000);

    fn shared(clock: &Arc<FakeClock>) -> Arc<Generator> {
        Arc::new(Generator::new(Layout::classic(), 5, clock.clone()).unwrap())
    }

    #[test]
    fn a_batch_of_zero_is_rejected() {
        let g = shared(&Arc::new(FakeClock::at(T0)));
        assert!(matches!(g.local(0), Err(Error::InvalidConfig { .. })));
    }

    #[test]
    fn ids_rise_within_a_handle_and_never_collide_with_others() {
        let clock = Arc::new(FakeClock::at(T0));
        let g = shared(&clock);
        let (mut a, mut b) = (g.local(8).unwrap(), g.local(3).unwrap());
        let mut all = Vec::new();
        let (mut last_a, mut last_b) = (0, 0);
        for round in 0..3000 {
            let x = a.next_id().unwrap();
            let y = b.next_id().unwrap();
            assert!(x > last_a && y > last_b, "each handle's IDs rise");
            (last_a, last_b) = (x, y);
            all.extend([x, y, g.next_id().unwrap()]);
            if round % 700 == 0 {
                clock.advance(Duration::from_micros(1500));
            }
        }
        crate::test_support::assert_distinct(&all, "handles");
        let parts = Layout::classic().decompose(last_a);
        assert_eq!(parts.worker_id, 5);
    }

    #[test]
    fn a_new_time_unit_starts_a_new_batch() {
        let clock = Arc::new(FakeClock::at(T0));
        let g = shared(&clock);
        let mut local = g.local(64).unwrap();
        let first = Layout::classic().decompose(local.next_id().unwrap());
        clock.advance(Duration::from_millis(1));
        let next = Layout::classic().decompose(local.next_id().unwrap());
        assert_eq!((next.timestamp, next.sequence), (first.timestamp + 1, 0));
        let shared = Layout::classic().decompose(g.next_id().unwrap());
        assert_eq!(
            (shared.timestamp, shared.sequence),
            (next.timestamp, 64),
            "the shared path goes past the new batch"
        );
    }

    #[test]
    fn a_batch_in_hand_is_not_issued_once_closed_or_past_its_deadline_or_window() {
        let clock = Arc::new(FakeClock::at(T0));
        let g = shared(&clock);
        let ts = Layout::classic().timestamp_at(T0).unwrap();
        g.open_until(Duration::from_secs(1), ts + 1_000);
        let mut local = g.local(64).unwrap();
        local.next_id().unwrap();
        g.close();
        assert!(matches!(local.next_id(), Err(NextIdError::NotReady { .. })));

        g.open_until(Duration::from_secs(1), ts + 1_000);
        local.next_id().unwrap();
        clock.advance(Duration::from_secs(1));
        assert!(
            matches!(local.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("deadline"))
        );

        g.open_until(Duration::from_secs(3), ts);
        assert!(
            matches!(local.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("window"))
        );
        g.open_until(Duration::from_secs(3), ts + 2_000);
        local.next_id().unwrap();
        g.open_until(Duration::from_secs(3), ts);
        assert!(
            matches!(local.next_id(), Err(NextIdError::NotReady { reason }) if reason.contains("window")),
            "a lowered window stops the batch in hand"
        );
    }

    #[test]
    fn a_batch_on_a_ticking_clock_is_issued_while_its_unit_is_the_cells() {
        // A ticker that does not tick during the test, over a fake clock.
        let base = Arc::new(FakeClock::at(T0));
        let g = crate::test_support::ticking_worker_generator(&base, Duration::from_secs(3_600));
        let cell = g.tick_cell().expect("a cell").clone();
        let lag = Duration::from_nanos(cell.stored().lag());
        g.open_until(base.now().mono + lag + Duration::from_secs(60), 1 << 40);
        let mut local = g.local(32).unwrap();
        let first = local.next_id().unwrap();
        assert_eq!(
            local.unit_base,
            cell.unit_base(),
            "the batch is in the cell's unit"
        );
        assert!(local.next_id().unwrap() > first);
        g.close();
        assert!(matches!(local.next_id(), Err(NextIdError::NotReady { .. })));
    }

    #[test]
    fn a_lagging_coarse_clock_is_judged_with_its_lag() {
        let clock = Arc::new(LaggingClock::at(T0));
        let g = Arc::new(Generator::new(Layout::classic(), 5, clock.clone()).unwrap());
        let ts = Layout::classic().timestamp_at(T0).unwrap();
        g.open_until(Duration::from_millis(100), ts + 10_000);
        let mut local = g.local(64).unwrap();
        local.next_id().unwrap();
        // 97 ms on: with its 4 ms of lag the coarse clock may be at 101, past
        // the deadline: the precise clock decides (still live).
        clock.inner.advance(Duration::from_millis(97));
        let reads = clock.precise_reads.load(Ordering::SeqCst);
        local.next_id().unwrap();
        assert!(
            clock.precise_reads.load(Ordering::SeqCst) > reads,
            "near the deadline the precise clock decides"
        );
        // At the deadline, with the coarse clock 3 ms behind (reading 97):
        // nothing more, from the batch or not.
        clock.inner.advance(Duration::from_millis(3));
        clock.lag_ms.store(3, Ordering::SeqCst);
        assert!(matches!(local.next_id(), Err(NextIdError::NotReady { .. })));
        assert!(matches!(g.next_id(), Err(NextIdError::NotReady { .. })));
    }

    #[test]
    fn a_clock_that_went_back_stops_the_batch_in_hand() {
        let clock = Arc::new(LaggingClock::at(T0));
        let g = Arc::new(Generator::new(Layout::classic(), 5, clock.clone()).unwrap());
        let mut local = g.local(64).unwrap();
        let first = local.next_id().unwrap();
        // Back by 5 s: beyond the coarse clock's lag, so the drift policy
        // answers (try later), not the 63 IDs left in the batch.
        clock.inner.step_wall(-5_000);
        assert!(matches!(
            local.next_id(),
            Err(NextIdError::ClockDriftTryLater { .. })
        ));
        // The clock right again: a new batch, then back by 2 ms, within the
        // lag: the batch in hand is still issued from, with no precise read.
        clock.inner.step_wall(5_000);
        let batch_start = Layout::classic().decompose(local.next_id().unwrap());
        assert!(Layout::classic().decompose(first).timestamp <= batch_start.timestamp);
        clock.inner.step_wall(-2);
        let reads = clock.precise_reads.load(Ordering::SeqCst);
        let next = Layout::classic().decompose(local.next_id().unwrap());
        assert_eq!(
            (next.timestamp, next.sequence),
            (batch_start.timestamp, batch_start.sequence + 1)
        );
        assert_eq!(clock.precise_reads.load(Ordering::SeqCst), reads);
    }

    #[test]
    fn threads_on_next_id_and_on_handles_never_share_an_id() {
        let g = Arc::new(Generator::with_system_clock(Layout::classic(), 1).unwrap());
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let g = g.clone();
                std::thread::spawn(move || {
                    let mut local = g.local(16).unwrap();
                    (0..20_000)
                        .map(|_| {
                            if t % 2 == 0 {
                                g.next_id().unwrap()
                            } else {
                                local.next_id().unwrap()
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        crate::test_support::assert_threads_distinct(threads);
    }
}
