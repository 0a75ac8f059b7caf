//! A clock the generator reads with plain loads: a thread of its own keeps
//! the time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::clock::whole_nanos;
use crate::{Clock, CoarseNanos, Reading, SystemClock};

/// A [`SystemClock`] whose cheap reading is the time a ticker thread stored
/// at its last tick: the generator's hot path reads it with two plain loads
/// instead of a call into the kernel's clock. Precise readings
/// ([`now`](Clock::now)), the wall clock's resync and sleeps are the system
/// clock's.
///
/// What stays true when the ticker is late (descheduled, the machine
/// overloaded): the cheap reading is older, never newer, so IDs carry older
/// timestamps, within the generator's reserved window as always; a full
/// sequence or a deadline near sends the generator to the precise clock.
/// What does not: between the lease deadline and the ticker's next tick an
/// ID may still be issued, with a timestamp from before the deadline. No ID
/// of a [`Worker`](crate::Worker) on it has a timestamp past its reserved
/// window, which the store keeps as the next holder's floor, so the next
/// holder's IDs are all larger: fail closed by timestamp, not by real time
/// (the default clock fails closed by real time).
///
/// ```
/// use std::sync::Arc;
/// use workerid_snowflake::{Generator, Layout, TickingClock};
/// let clock = Arc::new(TickingClock::new());
/// let generator = Generator::new(Layout::classic(), 7, clock.clone()).unwrap();
/// let a = generator.next_id().unwrap();
/// assert!(generator.next_id().unwrap() > a);
/// ```
#[derive(Debug)]
pub struct TickingClock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    base: SystemClock,
    /// The operating system's monotonic time at the last tick (ns).
    os_ns: AtomicU64,
    /// How far behind the stored time may be when the ticker keeps up: two
    /// periods.
    behind_ns: u64,
    period: Duration,
    ticks: AtomicU64,
}

impl Default for TickingClock {
    fn default() -> Self {
        Self::new()
    }
}

impl TickingClock {
    /// The default period: a millisecond, a classic layout's unit.
    pub const DEFAULT_PERIOD: Duration = Duration::from_millis(1);

    /// A clock whose ticker stores the time every millisecond.
    pub fn new() -> Self {
        Self::with_period(Self::DEFAULT_PERIOD)
    }

    /// A clock whose ticker stores the time every `period` (at least 10 µs).
    /// The ticker is a thread that ends when the clock is dropped.
    pub fn with_period(period: Duration) -> Self {
        let period = period.max(Duration::from_micros(10));
        let shared = Arc::new(Shared {
            base: SystemClock::new(),
            os_ns: AtomicU64::new(SystemClock::os_precise()),
            behind_ns: whole_nanos(period).saturating_mul(2),
            period,
            ticks: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&shared);
        let spawned = std::thread::Builder::new()
            .name("workerid-ticker".into())
            .spawn(move || tick(&weak, period));
        if let Err(e) = spawned {
            // Without a ticker the stored time would never move: every
            // reading goes to the precise clock instead (behind = MAX).
            tracing::warn!("no ticker thread ({e}): the clock reads the system clock");
            shared.os_ns.store(0, Ordering::Relaxed);
        }
        TickingClock { shared }
    }

    /// The ticker's period.
    pub fn period(&self) -> Duration {
        self.shared.period
    }

    /// Ticks so far: what the ticker costs (one wake-up each).
    pub fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Relaxed)
    }
}

/// The ticker: stores the time every `period` until the clock is gone.
fn tick(shared: &Weak<Shared>, period: Duration) {
    loop {
        std::thread::sleep(period);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared
            .os_ns
            .store(SystemClock::os_precise(), Ordering::Release);
        shared.ticks.fetch_add(1, Ordering::Relaxed);
    }
}

impl Clock for TickingClock {
    fn now(&self) -> Reading {
        self.shared.base.now()
    }

    fn now_coarse(&self) -> (Reading, Duration) {
        let n = self.now_coarse_nanos();
        let reading = Reading {
            mono: Duration::from_nanos(n.mono),
            wall: Duration::from_nanos(n.wall),
        };
        (reading, Duration::from_nanos(n.behind))
    }

    #[inline]
    fn now_coarse_nanos(&self) -> CoarseNanos {
        let os_ns = self.shared.os_ns.load(Ordering::Acquire);
        if os_ns == 0 {
            return CoarseNanos::exact(self.now());
        }
        let (mono, wall) = self.shared.base.nanos(os_ns);
        CoarseNanos {
            mono,
            wall,
            behind: self.shared.behind_ns,
        }
    }

    fn sleep(&self, duration: Duration) {
        self.shared.base.sleep(duration)
    }

    fn resync(&self) {
        self.shared.base.resync()
    }

    fn real_time(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_time_is_never_ahead_and_moves_on() {
        let clock = TickingClock::with_period(Duration::from_micros(200));
        let first = clock.now_coarse_nanos();
        let precise = clock.now();
        assert!(Duration::from_nanos(first.mono) <= precise.mono);
        assert_eq!(first.behind, 400_000);
        std::thread::sleep(Duration::from_millis(20));
        let later = clock.now_coarse_nanos();
        assert!(later.mono > first.mono, "the ticker stores the time");
        assert!(clock.ticks() > 0);
        assert!(Duration::from_nanos(later.mono) <= clock.now().mono);
    }

    #[test]
    fn the_ticker_ends_with_the_clock() {
        let clock = TickingClock::with_period(Duration::from_micros(100));
        let weak = Arc::downgrade(&clock.shared);
        drop(clock);
        std::thread::sleep(Duration::from_millis(20));
        assert!(weak.upgrade().is_none());
    }
}
