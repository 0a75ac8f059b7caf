//! Time for the fault suite: `CLOCK_MONOTONIC` instants shared by every
//! process of the machine, and a wall clock the nemesis can step.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use workerid::snowflake::{Clock, Reading};

/// The signals that step a client's wall clock: SIGUSR1 forward, SIGUSR2
/// back. The nemesis starts clients with them blocked (SIGUSR1's default
/// action ends a process that does not handle it yet); a client unblocks
/// them once it handles them. Only async-signal-safe calls: usable between
/// fork and exec.
pub fn clock_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset only write the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        set
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds. Every process of one machine reads
/// the same clock, so instants recorded by different processes compare.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass and nothing else.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A [`Clock`] whose monotonic time is `CLOCK_MONOTONIC` itself (so the
/// deadlines a worker computes are comparable across processes) and whose
/// wall time is the system's plus an offset that can be stepped at any time,
/// as an NTP step or an operator's `date -s` would.
///
/// ```
/// use workerid::snowflake::Clock;
/// use workerid_faults::clock::FaultClock;
/// let clock = FaultClock::new(0);
/// let before = clock.now().wall;
/// clock.step(-2_000);
/// assert!(clock.now().wall < before, "the wall clock went back");
/// assert_eq!(clock.offset_ms(), -2_000);
/// ```
///
/// Clients that make IDs on a ticking clock wrap it in a
/// [`TickingClock`](workerid::snowflake::TickingClock): a process frozen and
/// thawed issues IDs on the time its ticker stored before the freeze until
/// the ticker runs again.
#[derive(Debug)]
pub struct FaultClock {
    offset_ms: AtomicI64,
    rate: Rate,
}

/// A clock that runs fast or slow: from the instants it was made at, its
/// time advances `1 + ppm / 10^6` times as fast as the machine's.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    ppm: i64,
    mono_ns: u64,
    wall_ns: u64,
}

impl Rate {
    fn scale(&self, since: u64, now: u64) -> u64 {
        let elapsed = i128::from(now) - i128::from(since);
        let scaled = elapsed * (1_000_000 + i128::from(self.ppm)) / 1_000_000;
        u64::try_from(i128::from(since) + scaled).unwrap_or(0)
    }

    fn unscale(&self, since: u64, then: u64) -> u64 {
        let elapsed = i128::from(then) - i128::from(since);
        let real = elapsed * 1_000_000 / (1_000_000 + i128::from(self.ppm));
        u64::try_from(i128::from(since) + real).unwrap_or(0)
    }
}

impl FaultClock {
    /// The system's wall clock shifted by `offset_ms` (negative: behind).
    pub fn new(offset_ms: i64) -> FaultClock {
        FaultClock {
            offset_ms: AtomicI64::new(offset_ms),
            rate: Rate::default(),
        }
    }

    /// The same clock running at the wrong rate from now on: `ppm` parts
    /// per million fast (negative: slow), both its monotonic and its wall
    /// time, as a machine with a bad oscillator and no NTP. Its sleeps
    /// last as long as its own time says.
    ///
    /// ```
    /// use std::time::Duration;
    /// use workerid::snowflake::Clock;
    /// use workerid_faults::clock::{mono_ns, FaultClock};
    /// let slow = FaultClock::new(0).with_rate_ppm(-50_000); // x0.95
    /// let (real, own) = (mono_ns(), slow.now().mono);
    /// std::thread::sleep(Duration::from_millis(100));
    /// let real_elapsed = mono_ns() - real;
    /// let own_elapsed = slow.now().mono.as_nanos() as u64 - own.as_nanos() as u64;
    /// assert!(own_elapsed < real_elapsed);
    /// ```
    pub fn with_rate_ppm(mut self, ppm: i64) -> FaultClock {
        self.rate = Rate {
            ppm: ppm.clamp(-999_999, 1_000_000),
            mono_ns: mono_ns(),
            wall_ns: u64::try_from(system_wall().as_nanos()).unwrap_or(u64::MAX),
        };
        self
    }

    /// How far off its rate is, in parts per million.
    pub fn rate_ppm(&self) -> i64 {
        self.rate.ppm
    }

    /// The machine's `CLOCK_MONOTONIC` instant at which this clock's
    /// monotonic time reads `own_ns`: what a history records, so the checker
    /// compares a client's deadline with real instants.
    pub fn real_mono_ns(&self, own_ns: u64) -> u64 {
        if self.rate.ppm == 0 {
            own_ns
        } else {
            self.rate.unscale(self.rate.mono_ns, own_ns)
        }
    }

    /// Steps the wall clock by `ms` (negative: back); returns the new offset.
    pub fn step(&self, ms: i64) -> i64 {
        self.offset_ms.fetch_add(ms, Ordering::SeqCst) + ms
    }

    /// The offset from the system's wall clock, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }
}

fn system_wall() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

impl FaultClock {
    /// A reading at `mono` of the system's wall time `wall`, at this
    /// clock's rate, shifted.
    fn shifted(&self, mono: Duration, wall: Duration) -> Reading {
        let (mono, wall) = if self.rate.ppm == 0 {
            (mono, wall)
        } else {
            let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            (
                Duration::from_nanos(self.rate.scale(self.rate.mono_ns, nanos(mono))),
                Duration::from_nanos(self.rate.scale(self.rate.wall_ns, nanos(wall))),
            )
        };
        let wall_ms = i64::try_from(wall.as_millis()).unwrap_or(i64::MAX);
        let shifted = wall_ms.saturating_add(self.offset_ms()).max(0);
        let sub_ms = wall.subsec_nanos() % 1_000_000;
        Reading {
            mono,
            wall: Duration::from_millis(shifted as u64) + Duration::from_nanos(u64::from(sub_ms)),
        }
    }
}

impl Clock for FaultClock {
    fn now(&self) -> Reading {
        self.shifted(Duration::from_nanos(mono_ns()), system_wall())
    }

    fn sleep(&self, duration: Duration) {
        // This clock's duration, in the machine's time.
        let duration = if self.rate.ppm == 0 {
            duration
        } else {
            duration.mul_f64(1e6 / (1e6 + self.rate.ppm as f64))
        };
        if duration < Duration::from_millis(2) {
            let until = mono_ns().saturating_add(u64::try_from(duration.as_nanos()).unwrap_or(0));
            while mono_ns() < until {
                std::thread::yield_now();
            }
        } else {
            std::thread::sleep(duration);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_move_the_wall_clock_only() {
        let clock = FaultClock::new(1_000);
        let a = clock.now();
        assert_eq!(clock.step(-3_000), -2_000);
        let b = clock.now();
        assert!(b.mono >= a.mono, "monotonic time never goes back");
        let back = a.wall.saturating_sub(b.wall);
        assert!(
            back > Duration::from_millis(2_500) && back < Duration::from_millis(3_500),
            "{back:?}"
        );
    }

    #[test]
    fn a_clock_at_the_wrong_rate_converts_back_to_real_instants() {
        for ppm in [-50_000, -5_000, 5_000, 50_000] {
            let clock = FaultClock::new(0).with_rate_ppm(ppm);
            std::thread::sleep(Duration::from_millis(20));
            let real = mono_ns();
            let own = u64::try_from(clock.now().mono.as_nanos()).unwrap();
            let back = clock.real_mono_ns(own);
            assert!(back.abs_diff(real) < 1_000_000, "{ppm}: {back} vs {real}");
            let elapsed_own = own - clock.rate.mono_ns;
            let elapsed_real = real - clock.rate.mono_ns;
            let ratio = elapsed_own as f64 / elapsed_real as f64;
            assert!(
                (ratio - (1.0 + ppm as f64 / 1e6)).abs() < 0.002,
                "{ppm}: {ratio}"
            );
        }
    }

    #[test]
    fn mono_is_the_machines_monotonic_clock() {
        let a = mono_ns();
        std::thread::sleep(Duration::from_millis(5));
        assert!(mono_ns() >= a + 5_000_000);
    }
}
