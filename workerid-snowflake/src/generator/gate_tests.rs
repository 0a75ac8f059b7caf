//! The system clock's gate as the generator keeps it: opened by claims,
//! shut by every change of the lease and by an increment outside its unit.

use std::sync::atomic::AtomicBool;

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
            matches!(refused, NextIdError::ClockDriftTryLater { .. }),
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
/// the deadline; nor a unit the clock has not reached by its current offset
/// (a resync that moved it back since the claim read it), nor a full unit,
/// nor while the cell's lock is held (the claim goes on without waiting).
#[test]
fn a_gate_is_worked_out_from_the_lease_and_the_clock_as_they_are_when_opened() {
    let (clock, g) = system_generator();
    let ts = Layout::classic().decompose(g.next_id().unwrap()).timestamp;
    let last = |ts| g.packing.pack(ts, 0);
    let far = Duration::from_secs(1_000_000);
    g.open_until(far, ts - 1);
    g.open_gate(last(ts));
    assert!(!open_for(&g, &clock, ts), "past the window");
    g.open_until(far, ts);
    g.open_gate(last(ts));
    assert!(open_for(&g, &clock, ts), "the window's last unit");
    g.open_until(far, ts + 100);
    g.open_gate(last(ts + 50));
    assert!(
        !open_for(&g, &clock, ts + 50),
        "a unit the clock has not reached"
    );
    g.open_gate(g.packing.pack(ts, Layout::classic().max_sequence()));
    assert!(!open_for(&g, &clock, ts), "a full unit");
    let held = g.system_cell.setting();
    let (tx, rx) = std::sync::mpsc::channel();
    let answered = std::thread::scope(|s| {
        s.spawn(|| {
            g.open_gate(last(ts));
            tx.send(()).unwrap();
        });
        let answered = rx.recv_timeout(Duration::from_secs(5)).is_ok();
        drop(held);
        answered
    });
    assert!(answered, "a claim never waits for the cell's lock");
    assert!(!open_for(&g, &clock, ts), "the lock was held");
    // A deadline already passed: the gate holds no reading.
    g.open_until(Duration::from_nanos(1), ts);
    g.open_gate(last(ts));
    assert!(!open_for(&g, &clock, ts), "past the deadline");
}

/// A unit filled on the fast path is shut at its last number: no call
/// carries `last` out of it, so every later unit begins at sequence
/// number 0 (a carry would cost the next unit its first number), and its
/// last number is issued. A unit the thread was descheduled in is cut
/// short, so each unit must be a run from 0 and three in four whole: a
/// last number never issued, or issued only now and then, fails it.
#[test]
fn a_full_unit_shuts_the_gate_before_any_carry() {
    let layout = Layout::new(41, 20, 2, Duration::from_millis(1), crate::CLASSIC_EPOCH).unwrap();
    let g = Generator::with_system_clock(layout, 1).unwrap();
    let mut units = std::collections::BTreeMap::<u64, Vec<u64>>::new();
    for _ in 0..2_000 {
        let parts = layout.decompose(g.next_id().unwrap());
        assert_eq!(parts.worker_id, 1);
        units
            .entry(parts.timestamp)
            .or_default()
            .push(parts.sequence);
    }
    assert!(units.len() > 100, "{} units", units.len());
    // All but the first and the last unit, which the loop may cut short.
    let inner: Vec<_> = units.iter().skip(1).take(units.len() - 2).collect();
    for (unit, sequences) in &inner {
        assert_eq!(
            sequences[..],
            [0, 1, 2, 3][..sequences.len()],
            "unit {unit} is not a run from 0"
        );
    }
    let whole = inner.iter().filter(|(_, s)| s.len() == 4).count();
    assert!(
        whole * 4 >= inner.len() * 3,
        "{whole} of {} units whole",
        inner.len()
    );
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

/// Two callers of `next_id` and a `LocalGenerator` racing renewals (the
/// window moving down and up, deadlines near and far), closes, resyncs, a
/// `last` raised ahead and a final seal: every ID is distinct and carries
/// the worker's ID, each caller's IDs rise, none is above the largest
/// window ever reserved, and none is above what the seal returns.
#[test]
fn ids_stay_sound_while_the_lease_and_the_clock_race_the_gate() {
    let layout = Layout::classic();
    let clock = Arc::new(SystemClock::new());
    let g = Generator::new(layout, 9, clock.clone()).unwrap();
    let g = Arc::new(g.closed(Arc::new(Notify::new())));
    let now_ts = || g.unit_at(crate::clock::whole_nanos(clock.now().wall));
    let stop = AtomicBool::new(false);
    let mut window_max = 0;
    let (ids, sealed) = std::thread::scope(|s| {
        let callers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut ids = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(id) = g.next_id() {
                            ids.push(id);
                        }
                    }
                    ids
                })
            })
            .collect();
        let local = s.spawn(|| {
            let mut local = g.local(32).unwrap();
            let mut ids = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(id) = local.next_id() {
                    ids.push(id);
                }
            }
            ids
        });
        for round in 0..400u64 {
            let near = clock.now().mono + Duration::from_millis(20);
            let window = now_ts() + round % 4;
            match round % 6 {
                0 | 4 => g.open_until(near, window),
                1 => g.open_until(Duration::from_secs(1_000_000), window + 50),
                2 => clock.resync(),
                3 => g.set_last_used_timestamp(now_ts() + 1),
                _ => g.close(),
            }
            window_max = window_max.max(g.window_end());
            std::thread::sleep(Duration::from_micros(500));
        }
        stop.store(true, Ordering::Relaxed);
        let sealed = g.seal();
        let mut ids: Vec<Vec<u64>> = callers.into_iter().map(|c| c.join().unwrap()).collect();
        ids.push(local.join().unwrap());
        (ids, sealed)
    });
    for caller in &ids[..2] {
        assert!(
            caller.windows(2).all(|w| w[0] < w[1]),
            "a caller's IDs rise"
        );
    }
    let all: Vec<u64> = ids.concat();
    assert!(all.len() > 1_000, "{} IDs", all.len());
    crate::test_support::assert_distinct(&all, "callers");
    for id in all {
        let parts = layout.decompose(id);
        assert_eq!(parts.worker_id, 9, "{id:#x}");
        assert!(
            parts.timestamp <= window_max,
            "{} above {window_max}",
            parts.timestamp
        );
        assert!(
            parts.timestamp <= sealed,
            "{} above the seal's {sealed}",
            parts.timestamp
        );
    }
}
