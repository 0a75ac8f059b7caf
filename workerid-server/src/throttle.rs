//! At most one log line a period for a kind of event that can come once
//! per request (a store down answers every request with an error): the
//! first is logged, the rest counted, and the next line says how many it
//! stands for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A gate that opens once a period.
#[derive(Debug)]
pub struct Throttle {
    period_ms: u64,
    /// When the gate last opened, in ms since `start` (plus one: 0 is never).
    opened: AtomicU64,
    /// Events since then that it kept shut.
    held: AtomicU64,
    start: OnceLock<Instant>,
}

impl Throttle {
    /// A gate that opens at most once every `period`.
    pub const fn new(period: Duration) -> Self {
        Throttle {
            period_ms: period.as_millis() as u64,
            opened: AtomicU64::new(0),
            held: AtomicU64::new(0),
            start: OnceLock::new(),
        }
    }

    /// `Some(n)` when this event may be logged, `n` the events held back
    /// since the last one logged; `None` when it is to be counted only.
    pub fn pass(&self) -> Option<u64> {
        let now = self.start.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1;
        let opened = self.opened.load(Ordering::Relaxed);
        if (opened == 0 || now.saturating_sub(opened) >= self.period_ms)
            && self
                .opened
                .compare_exchange(opened, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.held.swap(0, Ordering::AcqRel));
        }
        self.held.fetch_add(1, Ordering::AcqRel);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_a_period_passes_and_says_how_many_were_held() {
        let throttle = Throttle::new(Duration::from_millis(100));
        assert_eq!(throttle.pass(), Some(0));
        for _ in 0..1000 {
            assert_eq!(throttle.pass(), None);
        }
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(throttle.pass(), Some(1000));
        assert_eq!(throttle.pass(), None);
    }

    #[test]
    fn threads_racing_let_one_through() {
        let throttle = Throttle::new(Duration::from_secs(60));
        let passed: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..10_000).filter(|_| throttle.pass().is_some()).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(passed, 1);
        assert_eq!(throttle.held.load(Ordering::Relaxed), 39_999);
    }
}
