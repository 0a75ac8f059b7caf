//! Time for the snowflake generator: a wall clock tied to a monotonic one.

use std::any::Any;
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

/// A coarse reading in whole nanoseconds (see [`Clock::now_coarse_nanos`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoarseNanos {
    /// [`Reading::mono`] in nanoseconds.
    pub mono: u64,
    /// [`Reading::wall`] in nanoseconds.
    pub wall: u64,
    /// How far behind the precise reading this one may be, in nanoseconds.
    pub behind: u64,
}

impl CoarseNanos {
    /// A precise reading, in nanoseconds: zero behind.
    pub fn exact(reading: Reading) -> Self {
        CoarseNanos {
            mono: whole_nanos(reading.mono),
            wall: whole_nanos(reading.wall),
            behind: 0,
        }
    }
}

/// Whole nanoseconds of a duration, saturating (584 years fit).
pub(crate) fn whole_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Where the generator gets its time, so tests can step it deterministically.
pub trait Clock: Any + Debug + Send + Sync + 'static {
    /// Both times, read together.
    fn now(&self) -> Reading;

    /// A cheaper reading that may be behind [`now`](Clock::now) by up to the
    /// duration returned with it, never ahead. The generator uses it where
    /// being that far behind cannot matter and goes to `now` where it can.
    /// Default: `now()`, zero behind.
    fn now_coarse(&self) -> (Reading, Duration) {
        (self.now(), Duration::ZERO)
    }

    /// [`now_coarse`](Clock::now_coarse) in whole nanoseconds: the
    /// generator's hot path reads this. Override it only to skip the
    /// conversions; it must agree with `now_coarse`. Default: converts
    /// `now_coarse`.
    fn now_coarse_nanos(&self) -> CoarseNanos {
        let (reading, behind) = self.now_coarse();
        CoarseNanos {
            mono: whole_nanos(reading.mono),
            wall: whole_nanos(reading.wall),
            behind: whole_nanos(behind),
        }
    }

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

    /// The time a ticker keeps for this clock in memory, for a
    /// [`Generator`](crate::Generator) to read without calling the clock:
    /// only a [`TickingClock`](crate::TickingClock) whose ticker runs gives
    /// one. Other clocks keep this default, `None`; a clock that wraps a
    /// `TickingClock` forwards its stored time only if its own coarse
    /// readings are that clock's, and holds that clock for as long as it
    /// forwards it (a generator trusts the stored time as the clock's).
    fn stored_time(&self) -> Option<crate::StoredTime> {
        None
    }
}

/// The production clock: wall time = the wall clock read at the last
/// [`resync`](Clock::resync) plus the monotonic time since, so one cheap
/// monotonic read per ID gives both readings, and a step of the operating
/// system's clock reaches the generator only at a resync (where a step back
/// is handled by the drift policy).
///
/// On Linux [`now_coarse`](Clock::now_coarse) reads `CLOCK_MONOTONIC_COARSE`
/// (the kernel's time at its last tick, a few ns to read against tens for
/// the precise clock on a virtual machine), declared as up to two ticks
/// behind (a tick is typically 1 to 4 ms). It is the kernel's own
/// value, never a cache of this process: a process resumed after SIGSTOP
/// reads the current time at once.
///
/// # Panics
/// A reading panics if the operating system refuses to read its monotonic
/// clock, as [`std::time::Instant::now`] does: no Linux this builds for
/// refuses, and no made-up time would be safe to issue IDs on.
#[derive(Debug)]
pub struct SystemClock {
    /// The operating system's monotonic time at creation, in nanoseconds:
    /// the coarse one where there is one, which no later reading of either
    /// clock is below.
    origin_ns: u64,
    /// How far the coarse clock may be behind (0: no coarse clock).
    coarse_lag: Duration,
    /// The same in nanoseconds.
    coarse_lag_ns: u64,
    /// Wall time minus monotonic time, in nanoseconds.
    offset: AtomicI64,
    /// Wall time minus the operating system's reading (`offset - origin_ns`).
    os_to_wall: AtomicI64,
}

/// On Linux: `clock_gettime` through libc, precise and coarse.
#[cfg(target_os = "linux")]
#[path = "clock/os_linux.rs"]
mod os;

/// Which operating system clock a reading is of (see
/// [`SystemClock::os_source`]).
pub(crate) type OsSource = os::Source;

/// Elsewhere: the standard library's monotonic clock, and no coarse one.
#[cfg(not(target_os = "linux"))]
#[path = "clock/os_other.rs"]
mod os;

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemClock {
    /// A clock synchronised with the wall clock now.
    pub fn new() -> Self {
        let coarse_lag = os::coarse_lag();
        let clock = SystemClock {
            origin_ns: Self::os_coarse(whole_nanos(coarse_lag)),
            coarse_lag,
            coarse_lag_ns: whole_nanos(coarse_lag),
            offset: AtomicI64::new(0),
            os_to_wall: AtomicI64::new(0),
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
        self.reading(os::precise())
    }

    fn now_coarse(&self) -> (Reading, Duration) {
        if self.coarse_lag.is_zero() {
            return (self.now(), Duration::ZERO);
        }
        (self.reading(os::coarse()), self.coarse_lag)
    }

    #[inline]
    fn now_coarse_nanos(&self) -> CoarseNanos {
        let (mono, wall) = self.nanos(Self::os_coarse(self.coarse_lag_ns));
        CoarseNanos {
            mono,
            wall,
            behind: self.coarse_lag_ns,
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
        let mono = self.mono_ns(os::precise());
        let offset = nanos(wall) - mono as i64;
        self.offset.store(offset, Ordering::Relaxed);
        self.os_to_wall.store(
            offset.wrapping_sub(self.origin_ns as i64),
            Ordering::Relaxed,
        );
    }
}

// The generator's fast path reads the operating system's clock and compares
// it with its deadline and epoch converted to the same terms, so that no
// conversion stands between the reading and the fetch-and-add.
impl SystemClock {
    /// The operating system reading [`now_coarse_nanos`](Clock::now_coarse_nanos)
    /// is made of, in nanoseconds, for a clock whose
    /// [`os_coarse_lag`](SystemClock::os_coarse_lag) is `lag_ns` (0: the
    /// precise clock).
    #[inline(always)]
    pub(crate) fn os_coarse(lag_ns: u64) -> u64 {
        if lag_ns == 0 {
            os::precise()
        } else {
            os::coarse()
        }
    }

    /// The clock [`os_coarse`](SystemClock::os_coarse) reads for `lag_ns`,
    /// chosen once for [`os_coarse_keeping`](SystemClock::os_coarse_keeping).
    pub(crate) fn os_source(lag_ns: u64) -> OsSource {
        os::source(lag_ns != 0)
    }

    /// The reading [`os_coarse`](SystemClock::os_coarse) makes of `source`
    /// ([`os_source`](SystemClock::os_source)), and `keep`, read back from
    /// memory the clock call could have written: the caller keeps no
    /// register across the call for it (see the generator's system clock
    /// path).
    #[inline(always)]
    pub(crate) fn os_coarse_keeping<T: Copy>(source: OsSource, keep: T) -> (u64, T) {
        os::reading_keeping(source, keep)
    }

    /// How far an [`os_coarse`](SystemClock::os_coarse) reading may be
    /// behind the precise one, in nanoseconds: fixed at creation.
    #[inline(always)]
    pub(crate) fn os_coarse_lag(&self) -> u64 {
        self.coarse_lag_ns
    }

    /// The operating system reading from which a coarse reading's
    /// monotonic time plus its lag may be at or past `deadline_mono_ns`:
    /// a reading below it is surely before the deadline.
    pub(crate) fn os_deadline(&self, deadline_mono_ns: u64) -> u64 {
        match deadline_mono_ns.checked_sub(self.coarse_lag_ns) {
            Some(0) | None => 0,
            Some(ahead) => ahead.saturating_add(self.origin_ns),
        }
    }

    /// What to add to an operating system reading for the wall time since
    /// `epoch_ns`, in nanoseconds: the wall time of
    /// [`now_coarse_nanos`](Clock::now_coarse_nanos) made of that reading,
    /// less the epoch.
    #[inline(always)]
    pub(crate) fn os_to_since(&self, epoch_ns: u64) -> i64 {
        self.os_to_wall().wrapping_sub(epoch_ns as i64)
    }

    /// What to add to an operating system reading for the wall time of
    /// [`now_coarse_nanos`](Clock::now_coarse_nanos) made of it, in
    /// nanoseconds: changed by every [`resync`](Clock::resync).
    #[inline(always)]
    pub(crate) fn os_to_wall(&self) -> i64 {
        self.os_to_wall.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn origin_ns(&self) -> u64 {
        self.origin_ns
    }

    fn mono_ns(&self, os_ns: u64) -> u64 {
        // Never below the origin (see `origin_ns`); saturating all the same.
        os_ns.saturating_sub(self.origin_ns)
    }

    /// Both readings from one operating-system reading: u64 arithmetic only
    /// (it is on the path of every ID).
    fn reading(&self, os_ns: u64) -> Reading {
        let (mono, wall) = self.nanos(os_ns);
        Reading {
            mono: Duration::from_nanos(mono),
            wall: Duration::from_nanos(wall),
        }
    }

    /// Monotonic and wall nanoseconds from one operating-system reading.
    #[inline]
    fn nanos(&self, os_ns: u64) -> (u64, u64) {
        let mono_ns = self.mono_ns(os_ns);
        let wall = (mono_ns as i64).wrapping_add(self.offset.load(Ordering::Relaxed));
        (mono_ns, wall.max(0) as u64)
    }
}

/// A clock that moves only when told, for deterministic tests: `sleep`
/// advances it, and the wall clock can be stepped back and forth on its own.
///
/// ```
/// use std::time::Duration;
/// use workerid_snowflake::{Clock, FakeClock};
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

/// A fake clock whose coarse reading is `lag_ms` behind its precise one
/// (declared up to 4 ms behind), counting precise readings.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct LaggingClock {
    pub(crate) inner: FakeClock,
    pub(crate) lag_ms: AtomicU64,
    pub(crate) precise_reads: AtomicU64,
}

#[cfg(test)]
impl LaggingClock {
    pub(crate) fn at(wall: Duration) -> Self {
        LaggingClock {
            inner: FakeClock::at(wall),
            lag_ms: AtomicU64::new(0),
            precise_reads: AtomicU64::new(0),
        }
    }
}

#[cfg(test)]
impl Clock for LaggingClock {
    fn now(&self) -> Reading {
        self.precise_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.now()
    }
    fn now_coarse(&self) -> (Reading, Duration) {
        let mut r = self.inner.now();
        let lag = Duration::from_millis(self.lag_ms.load(Ordering::SeqCst));
        r.mono = r.mono.saturating_sub(lag);
        r.wall = r.wall.saturating_sub(lag);
        (r, Duration::from_millis(4))
    }
    fn sleep(&self, duration: Duration) {
        self.inner.advance(duration)
    }
}

/// A fake clock whose resync applies a pending step of its wall clock, as
/// the system clock's resync picks up a step of the machine's clock.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct SteppedAtResync {
    pub(crate) inner: FakeClock,
    pub(crate) pending_ms: AtomicI64,
}

#[cfg(test)]
impl SteppedAtResync {
    pub(crate) fn at(wall: Duration) -> Self {
        SteppedAtResync {
            inner: FakeClock::at(wall),
            pending_ms: AtomicI64::new(0),
        }
    }
}

#[cfg(test)]
impl Clock for SteppedAtResync {
    fn now(&self) -> Reading {
        self.inner.now()
    }
    fn sleep(&self, duration: Duration) {
        self.inner.sleep(duration)
    }
    fn resync(&self) {
        self.inner
            .step_wall(self.pending_ms.swap(0, Ordering::SeqCst));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TickingClock;
    use std::sync::Arc;

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
        // Later, and after a resync: wall = monotonic time plus the offset.
        clock.sleep(Duration::from_millis(100));
        clock.resync();
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let diff = clock.now().wall.abs_diff(wall);
        assert!(diff < Duration::from_millis(50), "{diff:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_coarse_clock_is_used_when_its_ticks_are_fine_enough() {
        let lag = os::lag_of_resolution;
        assert_eq!(lag(Duration::ZERO), Duration::ZERO, "no tick reported");
        assert_eq!(lag(Duration::from_millis(4)), Duration::from_millis(8));
        assert_eq!(lag(Duration::from_millis(10)), Duration::from_millis(20));
        assert_eq!(lag(Duration::from_millis(11)), Duration::ZERO, "too coarse");
    }

    #[test]
    fn only_clocks_over_the_system_clock_pass_real_time() {
        let fake = || Arc::new(FakeClock::at(Duration::from_secs(5)));
        assert!(SystemClock::new().real_time());
        assert!(!fake().real_time());
        assert!(OffsetClock::new(SystemClock::new(), 5).real_time());
        assert!(!OffsetClock::new(FakeClock::default(), 5).real_time());
        let period = Duration::from_millis(1);
        assert!(TickingClock::over(Arc::new(SystemClock::new()), period).real_time());
        assert!(!TickingClock::over(fake(), period).real_time());
    }

    #[test]
    fn an_offset_clock_sleeps_and_resyncs_its_inner_clock() {
        let clock = OffsetClock::new(SteppedAtResync::at(Duration::from_secs(100)), -3_000);
        clock.sleep(Duration::from_millis(7));
        assert_eq!(clock.now().mono, Duration::from_millis(7));
        clock.inner.pending_ms.store(2_000, Ordering::SeqCst);
        clock.resync();
        assert_eq!(clock.now().wall, Duration::from_millis(99_007));
    }

    #[test]
    fn the_coarse_reading_is_behind_by_at_most_its_lag() {
        let clock = SystemClock::new();
        for _ in 0..10_000 {
            let before = clock.now();
            let (coarse, lag) = clock.now_coarse();
            let after = clock.now();
            assert!(coarse.mono <= after.mono, "never ahead");
            assert!(
                coarse.mono + lag + Duration::from_millis(1) >= before.mono,
                "{lag:?}"
            );
        }
        let fake = FakeClock::at(Duration::from_secs(5));
        assert_eq!(fake.now_coarse(), (fake.now(), Duration::ZERO));
    }

    #[test]
    fn offsets_shift_the_wall_only() {
        let clock = OffsetClock::new(FakeClock::at(Duration::from_secs(100)), -3_000);
        assert_eq!(clock.now().wall, Duration::from_secs(97));
        assert_eq!(clock.now().mono, Duration::ZERO);
    }
}
