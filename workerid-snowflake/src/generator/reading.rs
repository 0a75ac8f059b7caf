//! What the generator's hot paths make of a clock reading: whether the
//! lease is live, the time since the layout's epoch, and its time unit, in
//! integer arithmetic without a floating point or a 128-bit value.

/// The fast path's verdict on an operating system reading `os` of a clock
/// whose readings lag by up to `lag`: the time since the layout's epoch and
/// the lag while `os` is below `os_deadline` and `to_since` (wall minus
/// reading, less the epoch) does not put it before the epoch.
#[inline(always)]
pub(super) fn live_reading(
    os: u64,
    os_deadline: u64,
    to_since: i64,
    lag: u64,
) -> Option<(u64, u64)> {
    let since = (os as i64).wrapping_add(to_since);
    (os < os_deadline && since >= 0).then_some((since as u64, lag))
}

/// The operating system reading at which unit `ts` starts, in a layout
/// whose units are `span_ns` long, where `to_since` turns a reading into
/// the time since the layout's epoch; wrapping (a unit that began before
/// the reading's zero starts "below zero"). The readings whose wrapping
/// difference from it is below `span_ns` are those whose time since the
/// epoch ([`live_reading`]'s) is not negative and in unit `ts`
/// ([`unit_since`]), without a division: exactly, while unit `ts` ends at
/// or below 2^63 ns after the epoch, which [`span_ns`] ensures for the
/// layout's timestamps.
#[inline]
pub(super) fn unit_start(ts: u64, to_since: i64, span_ns: u64) -> u64 {
    ts.wrapping_mul(span_ns).wrapping_sub(to_since as u64)
}

/// Whether reading `os` is in unit `ts` by [`unit_start`]'s rule; never
/// for a `span_ns` of 0.
#[cfg(test)]
pub(super) fn in_unit(os: u64, to_since: i64, ts: u64, span_ns: u64) -> bool {
    os.wrapping_sub(unit_start(ts, to_since, span_ns)) < span_ns
}

/// The length of a unit of `unit_ms` milliseconds in nanoseconds when the
/// unit after `max_ts` starts at or below 2^63 ns, so [`unit_start`]'s
/// rule is exact for every timestamp up to `max_ts`; 0 otherwise.
pub(super) fn span_ns(unit_ms: u64, max_ts: u64) -> u64 {
    let unit_ns = unit_ms.saturating_mul(1_000_000);
    let end = max_ts
        .checked_add(1)
        .and_then(|units| units.checked_mul(unit_ns));
    match end {
        Some(end) if end <= 1 << 63 => unit_ns,
        _ => 0,
    }
}

/// The time unit of a time since a layout's epoch in nanoseconds, for units
/// of `unit_ms` milliseconds.
#[inline(always)]
pub(super) fn unit_since(since_ns: u64, unit_ms: u64) -> u64 {
    let ms = since_ns / 1_000_000;
    if unit_ms == 1 {
        ms
    } else {
        ms / unit_ms
    }
}

#[cfg(test)]
mod tests;
