//! The layouts: presets, limits, bad ones refused, decomposing IDs.

use super::*;

#[test]
fn presets_are_valid_and_last() {
    for layout in [
        Layout::classic(),
        Layout::sonyflake(),
        Layout::sonyflake_v2(),
    ] {
        layout.validate(SystemTime::now()).unwrap();
    }
    assert_eq!(
        format_date(Layout::classic().end().duration_since(UNIX_EPOCH).unwrap()),
        "2093-09-06"
    );
    assert_eq!(Layout::classic().ids_per_second(), 4_096_000.0);
}

#[test]
fn bad_layouts_say_why() {
    let ms = Duration::from_millis(1);
    let cases = [
        (Layout::new(42, 10, 12, ms, CLASSIC_EPOCH), "64 bits"),
        (Layout::new(30, 23, 1, ms, CLASSIC_EPOCH), "worker"),
        (
            Layout::new(41, 10, 0, ms, CLASSIC_EPOCH),
            "at least one bit",
        ),
        (
            Layout::new(41, 10, 12, Duration::from_micros(1500), CLASSIC_EPOCH),
            "milliseconds",
        ),
        (
            Layout::new(41, 10, 12, ms, CLASSIC_EPOCH + Duration::from_micros(500)),
            "epoch 1704067200.0005s after 1970 is not a whole number of milliseconds",
        ),
        (
            Layout::new(41, 10, 12, ms, Duration::from_secs(4_000_000_000)),
            "future",
        ),
        // 41 bits of ms from the Unix epoch: libx.net/workerid's layout, runs out in 2039.
        (
            Layout::new(38, 10, 12, ms, Duration::ZERO),
            "runs out on 1978",
        ),
    ];
    for (result, needle) in cases {
        let err = result.unwrap_err().to_string();
        assert!(err.contains(needle), "{err:?} should mention {needle:?}");
    }
}

#[test]
fn each_field_needs_a_bit_and_the_worker_field_may_take_every_worker_bit() {
    let ms = Duration::from_millis(1);
    for (t, w, s) in [(0, 10, 12), (41, 0, 12), (41, 10, 0)] {
        let err = Layout::new(t, w, s, ms, CLASSIC_EPOCH)
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least one bit"), "{t}/{w}/{s}: {err}");
    }
    let widest = workerid_core::MAX_WORKER_BITS;
    Layout::new(62 - widest, widest, 1, ms, CLASSIC_EPOCH).unwrap();
}

#[test]
fn a_layout_must_last_ten_years_of_365_days_from_now() {
    assert_eq!(MIN_LIFETIME, Duration::from_secs(315_360_000));
    let layout = Layout::classic();
    let last_valid = layout.end() - MIN_LIFETIME;
    layout.validate(last_valid).unwrap();
    let err = layout.validate(last_valid + Duration::from_nanos(1));
    assert!(err.unwrap_err().to_string().contains("within 10 years"));
}

#[test]
fn a_time_too_far_out_gives_the_largest_timestamp() {
    let layout = Layout::classic();
    assert_eq!(layout.timestamp_at(Duration::MAX), Some(u64::MAX));
    assert_eq!(layout.timestamp_at(layout.epoch()), Some(0));
    assert_eq!(layout.timestamp_at(Duration::ZERO), None);
}

#[test]
fn presets_keep_their_own_epochs() {
    for (layout, epoch) in [
        (Layout::classic(), CLASSIC_EPOCH),
        (Layout::sonyflake(), SONYFLAKE_EPOCH),
        (Layout::sonyflake_v2(), SONYFLAKE_V2_EPOCH),
        (Layout::twitter(), TWITTER_EPOCH),
        (Layout::discord(), DISCORD_EPOCH),
        (Layout::instagram(), INSTAGRAM_EPOCH),
        (Layout::javascript_safe(), CLASSIC_EPOCH),
    ] {
        assert_eq!(layout.epoch(), epoch, "{layout:?}");
    }
}

/// Day by day from 1970 to 2517, through the century years that are
/// not leap years (2100, 2200, 2300) and one that is (2400).
#[test]
fn dates_follow_the_gregorian_calendar_day_by_day() {
    let leap = |y: u64| y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
    let (mut y, mut m, mut d) = (1970, 1, 1);
    for day in 0..200_000u64 {
        let date = format_date(Duration::from_secs(day * 86_400 + 86_399));
        assert_eq!(date, format!("{y:04}-{m:02}-{d:02}"), "day {day}");
        let days_in_month = match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        (y, m, d) = if d < days_in_month {
            (y, m, d + 1)
        } else if m < 12 {
            (y, m + 1, 1)
        } else {
            (y + 1, 1, 1)
        };
    }
}

#[test]
fn compose_and_decompose_round_trip() {
    let layout = Layout::sonyflake();
    let id = layout.compose(123_456, 65_535, 255);
    let parts = layout.decompose(id);
    assert_eq!(
        (parts.timestamp, parts.worker_id, parts.sequence),
        (123_456, 65_535, 255)
    );
    assert_eq!(
        parts.time,
        UNIX_EPOCH + SONYFLAKE_EPOCH + Duration::from_millis(1_234_560)
    );
    assert!(id < 1 << 63);
}

#[test]
fn every_preset_is_valid_now_and_known_by_its_name() {
    let presets = [
        Layout::classic(),
        Layout::sonyflake(),
        Layout::sonyflake_v2(),
        Layout::twitter(),
        Layout::discord(),
        Layout::instagram(),
        Layout::javascript_safe(),
    ];
    for (name, layout) in Layout::PRESETS.into_iter().zip(presets) {
        assert_eq!(Layout::preset(name), Some(layout), "{name}");
        assert!(layout.validate(SystemTime::now()).is_ok(), "{name}");
        let id = layout.compose(layout.max_timestamp(), layout.max_worker_id(), 1);
        let parts = layout.decompose(id);
        assert_eq!(parts.worker_id, layout.max_worker_id(), "{name}");
        assert_eq!(parts.sequence, 1, "{name}");
    }
    assert_eq!(Layout::preset("custom"), None);
}

#[test]
fn dates() {
    assert_eq!(format_date(CLASSIC_EPOCH), "2024-01-01");
    assert_eq!(format_date(SONYFLAKE_EPOCH), "2014-09-01");
    assert_eq!(format_date(SONYFLAKE_V2_EPOCH), "2025-01-01");
    assert_eq!(format_date(Duration::ZERO), "1970-01-01");
}

#[test]
fn the_field_order_moves_only_the_worker_and_the_sequence() {
    let ours = Layout::new(39, 16, 8, Duration::from_millis(10), SONYFLAKE_EPOCH).unwrap();
    let theirs = ours.with_field_order(FieldOrder::SequenceThenWorker);
    assert_eq!(theirs, Layout::sonyflake());
    assert_eq!(
        ours.compose(5, 0x1234, 0x56),
        (5 << 24) | (0x1234 << 8) | 0x56
    );
    assert_eq!(
        theirs.compose(5, 0x1234, 0x56),
        (5 << 24) | (0x56 << 16) | 0x1234
    );
    // One worker's IDs rise with (timestamp, sequence) in either order.
    for layout in [ours, theirs] {
        let ids: Vec<u64> = [(5, 0), (5, 1), (5, 255), (6, 0)]
            .iter()
            .map(|&(ts, seq)| layout.compose(ts, 0xffff, seq))
            .collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{:?}",
            layout.field_order()
        );
    }
}
