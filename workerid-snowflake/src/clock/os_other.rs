//! Elsewhere than Linux: the standard library's monotonic clock, and no
//! coarse one. (A file of its own so that mutation testing on Linux, where
//! it is not built, leaves it out.)

use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub(crate) fn precise() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let elapsed = ORIGIN.get_or_init(Instant::now).elapsed();
    elapsed.as_secs() * 1_000_000_000 + u64::from(elapsed.subsec_nanos())
}

pub(crate) fn coarse() -> u64 {
    precise()
}

pub(crate) fn coarse_lag() -> Duration {
    Duration::ZERO
}

/// Whether a reading is of the coarse clock.
pub(crate) type Source = bool;

pub(crate) fn source(coarse: bool) -> Source {
    coarse
}

pub(crate) fn reading_keeping<T: Copy>(coarse: Source, keep: T) -> (u64, T) {
    let reading = if coarse { self::coarse() } else { precise() };
    (reading, keep)
}
