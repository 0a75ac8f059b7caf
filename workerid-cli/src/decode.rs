//! `decode`: a snowflake ID taken apart by a layout.

use std::time::{Duration, UNIX_EPOCH};

use crate::error::CliError;
use serde::Serialize;
use workerid::snowflake::Layout;

use crate::args::DecodeArgs;
use crate::render::{days_from_civil, utc};

fn usage(message: String) -> CliError {
    CliError::Usage(message)
}

/// A preset's name (`classic`, `sonyflake`, `sonyflake-v2`, `twitter`,
/// `discord`, `instagram`, `js-safe`) or `custom:TS,WORKER,SEQ,UNIT_MS,EPOCH`.
pub fn parse_layout(spec: &str) -> Result<Layout, CliError> {
    if let Some(layout) = Layout::preset(spec) {
        return Ok(layout);
    }
    let custom = spec.strip_prefix("custom:").ok_or_else(|| {
        usage(format!(
            "unknown layout {spec:?}: classic, sonyflake, sonyflake-v2, twitter, discord, \
             instagram, js-safe, or custom:TS_BITS,WORKER_BITS,SEQ_BITS,UNIT_MS,EPOCH"
        ))
    })?;
    let fields: Vec<&str> = custom.split(',').map(str::trim).collect();
    let [ts, worker, seq, unit, epoch] = fields.as_slice() else {
        return Err(usage(format!(
            "layout {spec:?} needs five fields: custom:TS_BITS,WORKER_BITS,SEQ_BITS,UNIT_MS,EPOCH \
             (e.g. custom:41,10,12,1,2024-01-01)"
        )));
    };
    let bits = |name: &str, v: &str| {
        v.parse::<u8>().map_err(|_| {
            usage(format!(
                "layout {spec:?}: {name} {v:?} is not a number of bits"
            ))
        })
    };
    let unit_ms: u64 = unit.parse().map_err(|_| {
        usage(format!(
            "layout {spec:?}: unit {unit:?} is not a number of ms"
        ))
    })?;
    let layout = Layout::new(
        bits("timestamp bits", ts)?,
        bits("worker bits", worker)?,
        bits("sequence bits", seq)?,
        Duration::from_millis(unit_ms),
        parse_epoch(epoch).ok_or_else(|| {
            usage(format!(
                "layout {spec:?}: epoch {epoch:?} is neither YYYY-MM-DD nor ms since 1970"
            ))
        })?,
    )?;
    Ok(layout)
}

/// `YYYY-MM-DD` (UTC midnight) or milliseconds since 1970.
fn parse_epoch(text: &str) -> Option<Duration> {
    if let Ok(ms) = text.parse::<u64>() {
        return Some(Duration::from_millis(ms));
    }
    let mut parts = text.splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next()?.parse().ok()?;
    let day: u32 = parts.next()?.parse().ok()?;
    if !(1970..=9999).contains(&year) || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    Some(Duration::from_secs(days * 86_400))
}

/// A decimal or `0x` hexadecimal ID.
fn parse_id(text: &str) -> Result<u64, CliError> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| usage(format!("{text:?} is not an ID (decimal, or hex with 0x)")))
}

fn describe(layout: &Layout) -> String {
    let epoch_ms = u64::try_from(layout.epoch().as_millis()).unwrap_or(u64::MAX);
    format!(
        "{} timestamp bits of {} ms since {}, {} worker bits, {} sequence bits",
        layout.timestamp_bits(),
        layout.unit().as_millis(),
        utc(epoch_ms).get(..10).unwrap_or_default(),
        layout.worker_bits(),
        layout.sequence_bits()
    )
}

#[derive(Debug, Serialize)]
struct DecodedJson {
    id: u64,
    time_utc: String,
    unix_ms: u64,
    timestamp: u64,
    worker_id: u32,
    sequence: u64,
    layout: String,
    /// Signs that the ID was not made with this layout.
    warnings: Vec<String>,
}

/// `workerid decode`.
pub fn decode(args: &DecodeArgs, json: bool) -> Result<String, CliError> {
    let layout = parse_layout(&args.layout)?;
    let id = parse_id(&args.id)?;
    if id > layout.max_id() {
        return Err(usage(format!(
            "ID {id} is larger than the layout's largest, {} ({}): another layout?",
            layout.max_id(),
            describe(&layout)
        )));
    }
    let parts = layout.decompose(id);
    let unix_ms = parts
        .time
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let now_ms = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let out = DecodedJson {
        warnings: warnings(&layout, parts.timestamp, unix_ms, now_ms),
        id,
        time_utc: utc(unix_ms),
        unix_ms,
        timestamp: parts.timestamp,
        worker_id: parts.worker_id,
        sequence: parts.sequence,
        layout: describe(&layout),
    };
    if json {
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    let mut text = format!(
        "id         {}\ntime       {} (unix ms {})\ntimestamp  {}\nworker     {}\nsequence   {}\nlayout     {}\n",
        out.id, out.time_utc, out.unix_ms, out.timestamp, out.worker_id, out.sequence, out.layout
    );
    for warning in &out.warnings {
        text.push_str(&format!("warning    {warning}\n"));
    }
    Ok(text)
}

/// How long an ID's time may be ahead of this machine's clock before it
/// looks like another layout's (clocks of a fleet differ by far less).
const FUTURE_SLACK_MS: u64 = 60_000;

/// How far ahead a time is, in the largest unit that reads well: years
/// for the decades a wrong layout gives.
fn ahead(by: Duration) -> String {
    const DAY: u64 = 86_400;
    let secs = by.as_secs();
    if secs >= 365 * DAY {
        format!("{:.1} years", secs as f64 / (365.25 * DAY as f64))
    } else if secs >= DAY {
        format!("{} days", secs / DAY)
    } else {
        crate::render::time_left(by)
    }
}

/// Signs that an ID was made with another layout: a time in the future, or
/// exactly at the layout's epoch (a timestamp of zero).
fn warnings(layout: &Layout, timestamp: u64, unix_ms: u64, now_ms: u64) -> Vec<String> {
    let mut said = Vec::new();
    if unix_ms > now_ms.saturating_add(FUTURE_SLACK_MS) {
        said.push(format!(
            "the time is {} in the future: is this ID of another layout (--layout)?",
            ahead(Duration::from_millis(unix_ms - now_ms))
        ));
    }
    if timestamp == 0 {
        said.push(format!(
            "the timestamp is 0, the layout's epoch itself ({}): is this ID of another layout (--layout)?",
            describe(layout)
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(id: &str, layout: &str) -> DecodeArgs {
        DecodeArgs {
            id: id.into(),
            layout: layout.into(),
        }
    }

    #[test]
    fn custom_layouts_and_epochs() {
        let layout = parse_layout("custom:41,10,12,1,2024-01-01").unwrap();
        assert_eq!(layout, Layout::classic());
        assert_eq!(parse_epoch("1704067200000"), parse_epoch("2024-01-01"));
        for bad in [
            "nope",
            "custom:41,10",
            "custom:x,10,12,1,2024-01-01",
            "custom:41,10,12,1,2024-13-01",
            "custom:42,10,12,1,2024-01-01", // 64 bits
        ] {
            assert!(parse_layout(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_of_another_layout_are_flagged() {
        let classic = Layout::classic();
        // A sonyflake ID read as classic lands far in the future.
        let future = classic.compose(classic.max_timestamp(), 1, 1);
        let out = decode(&args(&future.to_string(), "classic"), true).unwrap();
        assert!(out.contains("in the future"), "{out}");
        let at_epoch = classic.compose(0, 1, 1);
        let out = decode(&args(&at_epoch.to_string(), "classic"), false).unwrap();
        assert!(out.contains("warning    the timestamp is 0"), "{out}");
        let now = decode(
            &args(&classic.compose(1_000, 1, 1).to_string(), "classic"),
            true,
        )
        .unwrap();
        assert!(now.contains("\"warnings\": []"), "{now}");
    }

    #[test]
    fn decodes_and_refuses_ids_too_wide() {
        let layout = Layout::classic();
        let id = layout.compose(1_000, 7, 3);
        let out = decode(&args(&id.to_string(), "classic"), false).unwrap();
        assert!(out.contains("2024-01-01T00:00:01.000Z"), "{out}");
        assert!(
            out.contains("worker     7\n") && out.contains("sequence   3\n"),
            "{out}"
        );
        let hex = decode(&args(&format!("{id:#x}"), "classic"), false).unwrap();
        assert_eq!(hex, out);
        assert!(decode(&args(&u64::MAX.to_string(), "classic"), false).is_err());
        assert!(decode(&args("12ab", "classic"), false).is_err());
    }

    #[test]
    fn the_presets_people_migrate_from_decode_their_ids() {
        let tweet = decode(&args("1541815603606036480", "twitter"), false).unwrap();
        assert!(tweet.contains("2022-06-28T16:07:40.105Z"), "{tweet}");
        assert!(tweet.contains("378"), "{tweet}");
        let discord = decode(&args("175928847299117063", "discord"), true).unwrap();
        assert!(discord.contains("2016-04-30T11:18:25.796Z"), "{discord}");
        assert!(discord.contains("\"worker_id\": 32"), "{discord}");
        for name in ["instagram", "js-safe"] {
            assert!(parse_layout(name).is_ok(), "{name}");
        }
        // Sonyflake: time << 24 | sequence << 16 | machine.
        let sony = decode(&args("647732070973444355", "sonyflake"), true).unwrap();
        assert!(sony.contains("2026-11-25T12:00:00.000Z"), "{sony}");
        assert!(sony.contains("\"worker_id\": 4355"), "{sony}");
        assert!(sony.contains("\"sequence\": 0"), "{sony}");
        let v2 = (1u64 << 24) | (7 << 16) | 9;
        let v2 = decode(&args(&v2.to_string(), "sonyflake-v2"), true).unwrap();
        assert!(v2.contains("2025-01-01T00:00:00.010Z"), "{v2}");
        assert!(
            v2.contains("\"worker_id\": 9") && v2.contains("\"sequence\": 7"),
            "{v2}"
        );
        let err = parse_layout("snowflake").unwrap_err().to_string();
        assert!(err.contains("twitter") && err.contains("js-safe"), "{err}");
    }
}
