use proptest::prelude::*;

use super::*;
use crate::test_support::layouts;

/// The rule [`in_unit`] stands for: the reading is live by time since the
/// epoch (not before it) and that time's unit is `ts`.
fn in_unit_by_division(os: u64, to_since: i64, ts: u64, unit_ms: u64) -> bool {
    live_reading(os, u64::MAX, to_since, 0)
        .is_some_and(|(since, _)| unit_since(since, unit_ms) == ts)
}

proptest! {
    /// The span check is the division's verdict for every timestamp of a
    /// layout whose units it spans, for readings around the unit's ends and
    /// anywhere at all, and any offset between the reading and the wall
    /// clock; without a span it is never true.
    #[test]
    fn a_reading_is_in_a_unit_exactly_when_its_time_since_the_epoch_is(
        layout in 0..6usize,
        unit_ms in prop::sample::select(vec![1u64, 2, 10, 1_000, 86_400_000]),
        ts in any::<u64>(),
        to_since in any::<i64>(),
        units_off in -2i64..=2,
        within in any::<u64>(),
        anywhere in any::<u64>(),
    ) {
        // The test layouts, and the largest timestamps that still span.
        let max_ts = layouts()
            .get(layout)
            .map_or((1 << 63) / (unit_ms * 1_000_000) - 1, |l| l.max_timestamp());
        let span = span_ns(unit_ms, max_ts);
        // Timestamps near both ends of the range as often as in between.
        let ts = match ts % 3 {
            0 => max_ts - ts % 3,
            1 => ts % 3,
            _ => ts % (max_ts + 1),
        };
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
            .wrapping_add((units_off * span as i64) as u64)
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
