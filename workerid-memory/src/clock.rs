//! The monotonic clock the memory store judges expiry by.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic clock: the time elapsed since some fixed origin.
///
/// It must never go backwards. The memory store decides expiry on it alone.
pub trait MonotonicClock: Debug + Send + Sync + 'static {
    /// The time since this clock's origin.
    fn now(&self) -> Duration;
}

/// The operating system's monotonic clock ([`Instant`]).
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to, so expiry tests do not sleep.
///
/// ```
/// use std::time::Duration;
/// use workerid_memory::{ManualClock, MonotonicClock};
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), Duration::from_millis(1500));
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by` (saturating at about 584 years).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            });
    }
}

impl MonotonicClock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_moves_with_real_time() {
        let clock = SystemClock::new();
        let start = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        let elapsed = clock.now() - start;
        assert!(elapsed >= Duration::from_millis(20), "{elapsed:?}");
    }
}
