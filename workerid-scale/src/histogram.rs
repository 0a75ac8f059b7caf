//! A lock-free latency histogram: one atomic add per sample, no allocation,
//! so that timing every renewal of 10 000 workers costs next to nothing.
//!
//! Log-linear buckets of microseconds: exact below 16 µs, then 16 buckets per
//! power of two, so a quantile is at most 1/16 (6.25 %) above the true value
//! (it is reported as its bucket's upper bound, never below).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// Where a value of `micros` goes.
fn index(micros: u64) -> usize {
    if micros < SUB {
        return micros as usize;
    }
    let exponent = 63 - micros.leading_zeros(); // >= SUB_BITS
    let shift = exponent - SUB_BITS;
    let mantissa = (micros >> shift) & (SUB - 1);
    ((exponent - SUB_BITS + 1) as usize) * SUB as usize + mantissa as usize
}

/// The largest value bucket `i` holds, in microseconds.
fn upper_bound(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = i / SUB - 1;
    let mantissa = i % SUB;
    let bound = (u128::from(SUB + mantissa + 1) << shift) - 1;
    u64::try_from(bound).unwrap_or(u64::MAX)
}

/// A histogram that many tasks record into at once.
#[derive(Debug)]
pub struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Histogram {
    /// Records one sample.
    pub fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.counts[index(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far; the difference of two snapshots is a window.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// The counts of a [`Histogram`] at one instant, or of a window between two.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    counts: Vec<u64>,
}

impl Snapshot {
    /// The samples recorded after `earlier` was taken.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            counts: self
                .counts
                .iter()
                .enumerate()
                .map(|(i, c)| c.saturating_sub(earlier.counts.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }

    /// How many samples.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0.0..=1.0), as its bucket's upper bound; zero when
    /// there are no samples.
    pub fn quantile(&self, q: f64) -> Duration {
        let total = self.count();
        if total == 0 {
            return Duration::ZERO;
        }
        // The rank of the sample wanted, 1-based.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_micros(upper_bound(i));
            }
        }
        Duration::from_micros(upper_bound(self.counts.len().saturating_sub(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_tight() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 3, u64::MAX]) {
            let i = index(v);
            assert!(i < BUCKETS, "{v}");
            assert!(i >= last, "{v}");
            last = i;
            let upper = upper_bound(i);
            assert!(upper >= v, "{v} above its bucket's bound {upper}");
            assert!(
                upper as f64 <= v as f64 * (1.0 + 1.0 / 16.0) + 1.0,
                "{v}: {upper}"
            );
        }
    }

    #[test]
    fn quantiles_of_a_window() {
        let h = Histogram::default();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        let before = h.snapshot();
        for _ in 0..1000 {
            h.record(Duration::from_micros(50));
        }
        let window = h.snapshot().since(&before);
        assert_eq!(window.count(), 1000);
        assert_eq!(window.quantile(0.99), Duration::from_micros(51));
        let all = h.snapshot();
        let p99 = all.quantile(0.99);
        assert!(
            p99 >= Duration::from_millis(89) && p99 <= Duration::from_millis(96),
            "{p99:?}"
        );
        assert_eq!(Snapshot::default().quantile(0.99), Duration::ZERO);
    }
}
