//! Dates, durations and aligned tables for people to read.

use std::time::Duration;

/// The latest instant shown as a date: 9999-12-31T23:59:59.999Z, in ms since 1970.
const LAST_DATE_MS: u64 = 253_402_300_799_999;

/// `(year, month, day)` of a day number since 1970-01-01 (Howard Hinnant's
/// civil-from-days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// The day number since 1970-01-01 of a date (days-from-civil).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2026-11-22T10:11:12.345Z` for milliseconds since 1970 (UTC).
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

/// A watermark as a date when it reads as one (ms since 1970, up to year
/// 9999), else `None`. Zero (never set) is `None` too.
pub fn watermark_date(watermark: u64) -> Option<String> {
    (1..=LAST_DATE_MS)
        .contains(&watermark)
        .then(|| utc(watermark))
}

/// `12.345s`, `4m 03s`, `2h 05m`: time left, for people.
pub fn time_left(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{:.3}s", d.as_secs_f64())
    } else if secs < 3600 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h {:02}m", secs / 3600, secs / 60 % 60)
    }
}

/// `87 µs`, `1.25 ms`, `2.10 s`: a latency.
pub fn latency(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// Rows of cells as left-aligned columns, two spaces apart, the first row a
/// header; no trailing spaces.
pub fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<width$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        // 2024-01-01, the classic layout's epoch, plus a bit.
        assert_eq!(
            utc(1_704_067_200_000 + 3_723_004),
            "2024-01-01T01:02:03.004Z"
        );
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(LAST_DATE_MS), "9999-12-31T23:59:59.999Z");
        for (y, m, d) in [(1970, 1, 1), (2000, 2, 29), (2024, 1, 1), (2093, 9, 6)] {
            let days = days_from_civil(y, m, d);
            assert_eq!(civil_from_days(days), (y, m, d));
        }
        assert_eq!(days_from_civil(2024, 1, 1) * 86_400, 1_704_067_200);
        assert_eq!(watermark_date(0), None);
        assert_eq!(watermark_date(u64::MAX), None);
        assert!(watermark_date(1_704_067_200_000).is_some());
    }

    #[test]
    fn durations() {
        assert_eq!(time_left(Duration::from_millis(12_345)), "12.345s");
        assert_eq!(time_left(Duration::from_secs(243)), "4m 03s");
        assert_eq!(time_left(Duration::from_secs(7500)), "2h 05m");
        assert_eq!(latency(Duration::from_micros(87)), "87 µs");
        assert_eq!(latency(Duration::from_micros(1250)), "1.25 ms");
    }

    #[test]
    fn tables_align() {
        let rows = vec![
            vec!["ID".into(), "STATE".into()],
            vec!["1000".into(), "live".into()],
        ];
        assert_eq!(table(&rows), "ID    STATE\n1000  live\n");
    }
}
