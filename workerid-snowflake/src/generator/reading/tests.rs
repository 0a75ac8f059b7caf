use proptest::prelude::*;

use super::*;
use crate::test_support::{layouts, near_the_ends};

/// Units (ms) of every size: a millisecond to a day, and one so long that
/// only eight of them fit below 2^63 ns.
const UNITS_MS: [u64; 6] = [1, 2, 10, 1_000, 86_400_000, 1 << 40];

/// The rule [`in_unit`] stands for: the time since the epoch of `os` is
/// not negative and its unit is `ts`.
fn in_unit_by_division(os: u64, to_since: i64, ts: u64, unit_ms: u64) -> bool {
    let since = (os as i64).wrapping_add(to_since);
    since >= 0 && unit_since(since as u64, unit_ms) == ts
}

proptest! {
    /// The span check is the division's verdict for every timestamp of a
    /// layout whose units it spans, for readings around the unit's ends and
    /// anywhere at all, and any offset between the reading and the wall
    /// clock; without a span it is never true.
    #[test]
    fn a_reading_is_in_a_unit_exactly_when_its_time_since_the_epoch_is(
        layout in 0..=layouts().len(),
        unit_ms in prop::sample::select(UNITS_MS.to_vec()),
        ts in any::<u64>(),
        to_since in any::<i64>(),
        units_off in -2i64..=2,
        within in any::<u64>(),
        anywhere in any::<u64>(),
    ) {
        // The test layouts, and the largest timestamp whose unit still
        // spans.
        let largest_spanned = (1 << 63) / (unit_ms * 1_000_000) - 1;
        let max_ts = layouts().get(layout).map_or(largest_spanned, |l| l.max_timestamp());
        let span = span_ns(unit_ms, max_ts);
        let ts = near_the_ends(ts, max_ts);
        if span == 0 {
            prop_assert!(!in_unit(anywhere, to_since, ts, span));
            return Ok(());
        }
        // The unit's start as a reading, a whole number of units off, and
        // a unit's first, last, or any nanosecond from there.
        let start = ts.wrapping_mul(span).wrapping_sub(to_since as u64);
        let offset = match within % 3 {
            0 => 0,
            1 => span - 1,
            _ => within % span,
        };
        let near = start
            .wrapping_add((units_off as u64).wrapping_mul(span))
            .wrapping_add(offset);
        for os in [near, anywhere] {
            prop_assert_eq!(
                in_unit(os, to_since, ts, span),
                in_unit_by_division(os, to_since, ts, unit_ms),
                "reading {}, offset {}, unit {} of {} ns", os, to_since, ts, span
            );
        }
    }
}

#[test]
fn the_fast_path_is_live_strictly_before_the_deadline_and_from_the_epoch() {
    assert_eq!(live_reading(99, 100, 0, 4), Some((99, 4)));
    assert_eq!(live_reading(100, 100, 0, 4), None, "at the deadline");
    assert_eq!(live_reading(5, 100, -5, 4), Some((0, 4)), "at the epoch");
    assert_eq!(live_reading(5, 100, -6, 4), None, "before the epoch");
}

#[test]
fn a_unit_is_spanned_while_the_last_one_ends_by_2_to_the_63_ns() {
    const MS: u64 = 1_000_000;
    let classic = (1 << 41) - 1;
    assert_eq!(span_ns(1, classic), MS);
    assert_eq!(span_ns(10, (1 << 39) - 1), 10 * MS, "Sonyflake's");
    assert_eq!(span_ns(10, classic), 0, "697 years of 10 ms units");
    let units_below = (1u64 << 63) / MS;
    assert_eq!(
        span_ns(1, units_below - 1),
        MS,
        "the last unit ends below 2^63 ns"
    );
    assert_eq!(
        span_ns(1, units_below),
        0,
        "the last unit ends past 2^63 ns"
    );
    assert_eq!(span_ns(1, (1 << 50) - 1), 0);
    assert_eq!(span_ns(1, u64::MAX), 0);
    assert_eq!(span_ns(u64::MAX, 1), 0);
}

#[test]
fn no_reading_is_in_a_unit_without_a_span() {
    for os in [0, 1, 1 << 40, u64::MAX] {
        for to_since in [i64::MIN, -1, 0, 1, i64::MAX] {
            assert!(!in_unit(os, to_since, 0, 0));
            assert!(!in_unit(os, to_since, 12_345, 0));
        }
    }
}
