use proptest::prelude::*;

use super::*;
use crate::generator::packing::{values_of_last, Packing};
use crate::generator::reading::{span_ns, unit_since, unit_start};
use crate::test_support::{layouts, near_the_ends};

/// The full rule for a reading: before the deadline, and its time since
/// the epoch (by division) before unit `ts + 1`; a reading before the
/// epoch is before every unit.
fn reading_before(os: u64, deadline: u64, to_since: i64, ts: u64, unit_ms: u64) -> bool {
    let since = (os as i64).wrapping_add(to_since);
    os < deadline && (since < 0 || unit_since(since as u64, unit_ms) <= ts)
}

proptest! {
    /// A gate admits a reading and an increment exactly where the full
    /// rule does: the reading before the deadline and before the end of
    /// the gate's unit, and `last`, before the increment, in that unit with
    /// its worker field whole and a sequence number left. For every value
    /// `last` takes (carried, past the layout's last unit, sealed),
    /// readings in the unit, a unit off and at its ends, deadlines before,
    /// in and after the unit, offsets that put the unit's end anywhere.
    /// A unit that ended before the reading's zero admits nothing.
    #[test]
    fn a_gate_admits_what_the_full_rule_does(
        layout in 0..5usize,
        worker in any::<u32>(),
        ts in any::<u64>(),
        seq in any::<u64>(),
        carries in 1u64..4,
        above_sealed in 0u64..1_000,
        units_off in -1i64..=1,
        within in any::<u64>(),
        to_since in any::<i64>(),
        deadline_at in any::<u64>(),
        os_to_wall in any::<i64>(),
    ) {
        let layout = layouts()[layout];
        let max_ts = layout.max_timestamp();
        let packing = Packing::new(&layout, worker % (layout.max_worker_id() + 1));
        let unit_ms = layout.unit().as_millis() as u64;
        let span = span_ns(unit_ms, max_ts);
        prop_assume!(span != 0);
        let ts = near_the_ends(ts, max_ts);
        let start = unit_start(ts, to_since, span);
        let end = unit_start(ts + 1, to_since, span);
        let at = |n: u64| match n % 4 {
            0 => 0,
            1 => span - 1,
            2 => span,
            _ => n % span,
        };
        let deadline = match deadline_at % 5 {
            0 => 0,
            1 => u64::MAX,
            // Before, in or after the unit.
            n => start
                .wrapping_add(n.wrapping_sub(3).wrapping_mul(span))
                .wrapping_add(at(deadline_at / 5)),
        };
        let gate = Gate::new(packing.pack(ts, 0), end, deadline, os_to_wall);
        let os = start
            .wrapping_add((units_off as u64).wrapping_mul(span))
            .wrapping_add(at(within));
        // Readings are below 2^63; so is the end of a unit that did not
        // end before their zero.
        prop_assume!(os < 1 << 63);
        let ended_before_zero = end >= 1 << 63;
        let rule = !ended_before_zero && reading_before(os, deadline, to_since, ts, unit_ms);
        prop_assert_eq!(
            gate.admits_reading(os, os_to_wall),
            rule,
            "reading {}, unit from {} to {}, deadline {}", os, start, end, deadline
        );
        prop_assert!(!gate.admits_reading(os, os_to_wall.wrapping_add(1)), "another offset");
        for current in values_of_last(&layout, &packing, ts, seq, carries, above_sealed) {
            let rule = packing.ts(current) == ts && packing.issuable(current);
            prop_assert_eq!(
                gate.admits_increment(current, packing.seq_limit()),
                rule,
                "last {:#x}", current
            );
        }
    }
}

#[test]
fn a_gate_is_open_for_its_unit_and_offset_until_shut() {
    let cell = SystemCell::default();
    assert_eq!(cell.gate(), Gate::SHUT, "a new cell is shut");
    assert!(!cell.gate().admits_reading(0, 0));
    let gate = Gate::new(17, 1_100, u64::MAX, -5);
    assert!(gate.is_open_for(17, -5));
    assert!(!gate.is_open_for(18, -5), "another unit");
    assert!(!gate.is_open_for(17, -4), "another offset");
    assert!(
        !Gate::new(17, 1_100, 0, -5).is_open_for(17, -5),
        "no reading left"
    );
    cell.open(&cell.setting(), gate);
    assert_eq!(cell.gate(), gate);
    assert!(cell.gate().admits_reading(1_099, -5));
    assert!(!cell.gate().admits_reading(1_100, -5));
    cell.shut(&cell.setting());
    assert!(!cell.gate().is_open_for(17, -5));
    assert!(
        !cell.gate().admits_reading(0, -5),
        "shut: no reading at all"
    );
}

/// A call shuts the gate it read, never a newer one: a miss on a gate
/// since replaced leaves the replacement open.
#[test]
fn a_call_shuts_only_the_gate_it_read() {
    let cell = SystemCell::default();
    let (old, new) = (
        Gate::new(17, 1_100, u64::MAX, 0),
        Gate::new(18, 1_200, u64::MAX, 0),
    );
    cell.open(&cell.setting(), old);
    let seen = cell.gate();
    cell.open(&cell.setting(), new);
    cell.shut_seen(seen.end);
    assert_eq!(cell.gate(), new, "the newer gate stays open");
    cell.shut_seen(cell.gate().end);
    assert!(!cell.gate().is_open_for(18, 0), "the gate read is shut");
}

/// A claim that finds the cell's lock held (a change of the lease, another
/// claim opening the gate) goes on without opening it, and never waits.
#[test]
fn try_setting_never_waits() {
    let cell = SystemCell::default();
    let held = cell.setting();
    assert!(cell.try_setting().is_none());
    drop(held);
    assert!(cell.try_setting().is_some());
}

#[test]
fn the_deadline_or_the_units_end_bounds_the_readings() {
    let gate = |unit_end, deadline| Gate::new(1, unit_end, deadline, 0);
    assert!(gate(1_100, 1_050).admits_reading(1_049, 0));
    assert!(
        !gate(1_100, 1_050).admits_reading(1_050, 0),
        "the deadline first"
    );
    assert!(gate(1_100, 1_101).admits_reading(1_099, 0));
    assert!(
        !gate(1_100, 1_101).admits_reading(1_100, 0),
        "the unit's end first"
    );
    assert!(!gate(1_100, 0).admits_reading(0, 0), "closed");
    // A unit that ended before the reading's zero: nothing, not every
    // reading up to the deadline.
    assert!(!gate(u64::MAX - 10, u64::MAX).admits_reading(5, 0));
    assert!(!gate(1 << 63, u64::MAX).admits_reading(5, 0));
    assert!(gate((1 << 63) - 1, u64::MAX).admits_reading(5, 0));
}
