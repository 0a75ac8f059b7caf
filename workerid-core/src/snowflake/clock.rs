//! Time for the snowflake generator: a wall clock tied to a monotonic one.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One reading of a [`Clock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Monotonic time since the clock's origin: never goes back. Lease
    /// deadlines are judged on it.
    pub mono: Duration,
    /// Wall-clock time since the Unix epoch: may go back. IDs carry it.
    pub wall: Duration,
}

/// Where the generator gets its time, so tests can step it deterministically.
pub trait Clock: Debug + Send + Sync + 'static {
    /// Both times, read together.
    fn now(&self) -> Reading;

    /// Blocks the calling thread for `duration` (a fake clock moves instead).
    fn sleep(&self, duration: Duration);

    /// Re-reads the operating system's wall clock (the keeper calls it after
    /// every renewal). Default: nothing to do.
    fn resync(&self) {}

    /// Whether [`sleep`](Clock::sleep) is real time passing, so an async
    /// caller may wait on a runtime timer instead of a blocked thread (a
    /// process joining thousands of workers at once would otherwise queue on
    /// the runtime's blocking threads). Default: false (a fake clock moves
    /// only when its `sleep` is called).
    fn real_time(&self) -> bool {
        false
    }
}

/// The production clock: wall time = the wall clock read at the last
/// [`resync`](Clock::resync) plus the monotonic time since, so one cheap
/// monotonic read per ID gives both readings, and a step of the operating
/// system's clock reaches the generator only at a resync (where a step back
/// is handled by the drift policy).
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
    /// Wall time minus monotonic time, in nanoseconds.
    offset: AtomicI64,
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemClock {
    /// A clock synchronised with the wall clock now.
    pub fn new() -> Self {
        let clock = SystemClock {
            origin: Instant::now(),
            offset: AtomicI64::new(0),
        };
        clock.resync();
        clock
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl Clock for SystemClock {
    fn now(&self) -> Reading {
        // On the path of every ID: u64 arithmetic only.
        let mono = self.origin.elapsed();
        let mono_ns = mono.as_secs() * 1_000_000_000 + u64::from(mono.subsec_nanos());
        let wall = (mono_ns as i64).wrapping_add(self.offset.load(Ordering::Relaxed));
        Reading {
            mono,
            wall: Duration::from_nanos(wall.max(0) as u64),
        }
    }

    fn sleep(&self, duration: Duration) {
        if duration < Duration::from_millis(2) {
            // Short waits (the next millisecond) spin: a sleep overshoots.
            let until = Instant::now() + duration;
            while Instant::now() < until {
                std::thread::yield_now();
            }
        } else {
            std::thread::sleep(duration);
        }
    }

    fn real_time(&self) -> bool {
        true
    }

    fn resync(&self) {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mono = self.origin.elapsed();
        self.offset
            .store(nanos(wall) - nanos(mono), Ordering::Relaxed);
    }
}

/// A clock that moves only when told, for deterministic tests: `sleep`
/// advances it, and the wall clock can be stepped back and forth on its own.
///
/// ```
/// use std::time::Duration;
/// use workerid_core::snowflake::{Clock, FakeClock};
/// let clock = FakeClock::at(Duration::from_secs(1_800_000_000));
/// clock.step_wall(-2_000); // the wall clock goes back 2 s
/// clock.sleep(Duration::from_secs(1)); // both move on 1 s
/// assert_eq!(clock.now().wall, Duration::from_secs(1_799_999_999));
/// assert_eq!(clock.now().mono, Duration::from_secs(1));
/// ```
#[derive(Debug, Default)]
pub struct FakeClock {
    mono_ns: AtomicU64,
    offset_ns: AtomicI64,
}

impl FakeClock {
    /// A clock whose wall time is `wall` (since the Unix epoch) and monotonic time zero.
    pub fn at(wall: Duration) -> Self {
        FakeClock {
            mono_ns: AtomicU64::new(0),
            offset_ns: AtomicI64::new(nanos(wall)),
        }
    }

    /// Moves both times forward.
    pub fn advance(&self, by: Duration) {
        self.mono_ns.fetch_add(
            u64::try_from(by.as_nanos()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
    }

    /// Steps the wall clock alone by `millis` (negative: back).
    pub fn step_wall(&self, millis: i64) {
        self.offset_ns
            .fetch_add(millis * 1_000_000, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Reading {
        let mono = self.mono_ns.load(Ordering::SeqCst);
        let wall = (mono as i64).saturating_add(self.offset_ns.load(Ordering::SeqCst));
        Reading {
            mono: Duration::from_nanos(mono),
            wall: Duration::from_nanos(wall.max(0) as u64),
        }
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// Another clock with its wall time shifted by a fixed amount: a machine
/// whose clock is off (tests of hand-overs between disagreeing clocks).
#[derive(Debug)]
pub struct OffsetClock<C> {
    inner: C,
    offset_ms: i64,
}

impl<C: Clock> OffsetClock<C> {
    /// `inner`'s wall time plus `offset_ms` milliseconds (negative: behind).
    pub fn new(inner: C, offset_ms: i64) -> Self {
        OffsetClock { inner, offset_ms }
    }
}

impl<C: Clock> Clock for OffsetClock<C> {
    fn now(&self) -> Reading {
        let r = self.inner.now();
        let wall = nanos(r.wall).saturating_add(self.offset_ms * 1_000_000);
        Reading {
            mono: r.mono,
            wall: Duration::from_nanos(wall.max(0) as u64),
        }
    }
    fn sleep(&self, duration: Duration) {
        self.inner.sleep(duration)
    }
    fn resync(&self) {
        self.inner.resync()
    }
    fn real_time(&self) -> bool {
        self.inner.real_time()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_tracks_the_wall_clock() {
        let clock = SystemClock::new();
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let read = clock.now().wall;
        let diff = read.abs_diff(wall);
        assert!(diff < Duration::from_millis(50), "{diff:?}");
        let a = clock.now().mono;
        clock.sleep(Duration::from_millis(1));
        assert!(clock.now().mono >= a + Duration::from_millis(1));
    }

    #[test]
    fn offsets_shift_the_wall_only() {
        let clock = OffsetClock::new(FakeClock::at(Duration::from_secs(100)), -3_000);
        assert_eq!(clock.now().wall, Duration::from_secs(97));
        assert_eq!(clock.now().mono, Duration::ZERO);
    }
}
