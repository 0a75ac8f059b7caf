//! The system clock's gate as the generator keeps it: opened by claims,
//! shut by every change of the lease and by an increment outside its unit.

use super::*;

fn system_generator() -> (Arc<SystemClock>, Generator) {
    let clock = Arc::new(SystemClock::new());
    let g = Generator::new(Layout::classic(), 1, clock.clone()).unwrap();
    (clock, g)
}

/// `last` with sequence number 0 in unit `ts`: what a gate of that unit
/// holds.
fn base_of(g: &Generator, ts: u64) -> u64 {
    g.packing.pack(ts, 0)
}

fn open_for(g: &Generator, clock: &SystemClock, ts: u64) -> bool {
    g.system_cell
        .gate()
        .is_open_for(base_of(g, ts), clock.os_to_wall())
}

/// A `last` raised ahead of the clock (a watermark from a machine whose
/// clock is ahead) is past the gate's unit: the first call gives up one
/// increment and shuts the gate, and the calls that follow go to the
/// claim, which answers with the drift policy, without moving `last`. A
/// gate left open would let every call carry `last` further ahead. Units
/// of a second, so that the calls all fall in the gate's unit.
#[test]
fn a_last_raised_ahead_moves_once_however_often_the_caller_retries() {
    let layout = Layout::new(33, 18, 12, Duration::from_secs(1), crate::CLASSIC_EPOCH).unwrap();
    let g = Generator::with_system_clock(layout, 1).unwrap();
    assert!(g.system.is_some(), "the system clock's fast path");
    g.next_id().unwrap();
    let ahead = g.last_used_timestamp() + 5;
    g.set_last_used_timestamp(ahead);
    let raised = g.last.load(Ordering::Acquire);
    let mut retried = None;
    for _ in 0..20_000 {
        let refused = g.next_id().unwrap_err();
        assert!(
            matches!(refused, Error::ClockDriftTryLater { .. }),
            "{refused}"
        );
        retried.get_or_insert(g.last.load(Ordering::Acquire));
    }
    assert_eq!(
        retried,
        Some(raised + g.packing.step()),
        "one increment given up"
    );
    assert_eq!(
        g.last.load(Ordering::Acquire),
        raised + g.packing.step(),
        "and no more"
    );
}

/// Every change of the lease shuts the gate; the next claim opens it from
/// the new lease, and a closed generator's claims open nothing.
#[test]
fn a_change_of_the_lease_shuts_the_gate_and_a_claim_opens_it_again() {
    let (clock, g) = system_generator();
    let g = g.closed(Arc::new(Notify::new()));
    assert!(!g.system_cell.gate().is_open_for(0, 0));
    assert!(g.next_id().is_err(), "closed");
    let max_ts = Layout::classic().max_timestamp();
    let far = Duration::from_secs(1_000_000);
    g.open_until(far, max_ts);
    let ts = Layout::classic().decompose(g.next_id().unwrap()).timestamp;
    assert!(open_for(&g, &clock, ts), "the claim opened its unit");
    g.open_until(far, max_ts);
    assert!(!open_for(&g, &clock, ts), "a renewal shuts it");
    let ts = Layout::classic().decompose(g.next_id().unwrap()).timestamp;
    assert!(open_for(&g, &clock, ts));
    g.close();
    assert!(!open_for(&g, &clock, ts), "a close shuts it");
    assert!(g.next_id().is_err());
    assert!(!open_for(&g, &clock, ts), "a refused claim opens nothing");
}

/// A claim that raced a change of the lease opens its unit only as the new
/// lease allows: never a unit past the window, never a reading at or past
/// the deadline.
#[test]
fn a_gate_is_worked_out_from_the_lease_as_it_is_when_opened() {
    let (clock, g) = system_generator();
    let ts = Layout::classic().decompose(g.next_id().unwrap()).timestamp;
    let far = Duration::from_secs(1_000_000);
    g.open_until(far, ts - 1);
    g.open_gate(ts);
    assert!(!open_for(&g, &clock, ts), "past the window");
    g.open_until(far, ts);
    g.open_gate(ts);
    assert!(open_for(&g, &clock, ts), "the window's last unit");
    // A deadline already passed: the gate holds no reading.
    g.open_until(Duration::from_nanos(1), ts);
    g.open_gate(ts);
    assert!(!open_for(&g, &clock, ts), "past the deadline");
}

/// On the system clock no call that begins at or after the deadline (by
/// the precise clock) issues an ID, with deadlines at several places in a
/// unit and in the coarse clock's tick.
#[test]
fn the_fast_path_issues_nothing_from_the_deadline_on() {
    let (clock, g) = system_generator();
    let g = g.closed(Arc::new(Notify::new()));
    let max_ts = Layout::classic().max_timestamp();
    for round in 0..8u64 {
        let deadline = clock.now().mono + Duration::from_micros(20_000 + round * 1_300);
        g.open_until(deadline, max_ts);
        let (mut before_deadline, mut after) = (0, 0);
        loop {
            let began = clock.now().mono;
            let answer = g.next_id();
            if began >= deadline {
                assert!(
                    answer.is_err(),
                    "issued {:?} past the deadline",
                    began - deadline
                );
                after += 1;
                if began >= deadline + Duration::from_millis(10) {
                    break;
                }
            } else if answer.is_ok() {
                before_deadline += 1;
            }
        }
        assert!(before_deadline > 0 && after > 0);
    }
}

/// A resync that moves the clock's wall offset makes the open gate admit
/// nothing (its range is the old offset's); the next claim opens it by the
/// new one.
#[test]
fn a_resync_leaves_the_gate_behind_until_a_claim_opens_it_again() {
    let (clock, g) = system_generator();
    g.next_id().unwrap();
    let before = clock.os_to_wall();
    for _ in 0..10_000 {
        clock.resync();
        if clock.os_to_wall() != before {
            break;
        }
    }
    assert_ne!(clock.os_to_wall(), before, "the offset never moved");
    let os = SystemClock::os_coarse(g.os_lag);
    assert!(!g.system_cell.gate().admits_reading(os, clock.os_to_wall()));
    let ts = Layout::classic().decompose(g.next_id().unwrap()).timestamp;
    assert!(open_for(&g, &clock, ts));
}
