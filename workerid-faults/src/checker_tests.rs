//! The checker on hand-made histories: a clean one passes, each broken rule
//! is named.

use super::*;

const MS: u64 = 1_000_000;

fn layout() -> Layout {
    Layout::classic()
}

/// A timestamp well inside the classic layout.
const TS: u64 = 100_000_000;

fn id(ts: u64, worker: u32, seq: u64) -> u64 {
    layout().compose(ts, worker, seq)
}

struct Lease {
    worker: u32,
    fence: u64,
    sent: u64,
    granted: u64,
    deadline: u64,
    window: u64,
    batches: Vec<(u64, Vec<u64>)>,
}

fn lease(worker: u32, fence: u64, at_ms: u64, ids: Vec<u64>) -> Lease {
    Lease {
        worker,
        fence,
        sent: at_ms * MS,
        granted: (at_ms + 1) * MS,
        deadline: (at_ms + 100) * MS,
        window: TS + 1_000_000,
        batches: vec![((at_ms + 10) * MS, ids)],
    }
}

fn history(client: &str, leases: Vec<Lease>) -> ClientHistory {
    let mut events = Vec::new();
    for (n, l) in leases.into_iter().enumerate() {
        let n = n as u32;
        events.push(Event::Grant {
            lease: n,
            worker_id: l.worker,
            fence: l.fence,
            sent: l.sent,
            granted: l.granted,
            deadline: l.deadline,
            window_end: l.window,
        });
        for (tl, ids) in l.batches {
            events.push(Event::Ids {
                lease: n,
                t0: tl - 1,
                tl,
                t1: tl + 1,
                deadline: l.deadline,
                window_end: l.window,
                ids,
            });
        }
        events.push(Event::Stopping {
            lease: n,
            at: l.deadline - 1,
        });
    }
    ClientHistory {
        client: client.to_string(),
        events,
    }
}

fn run(histories: Vec<ClientHistory>) -> Report {
    check(&histories, &CheckOptions::new(layout()))
}

fn kinds(report: &Report) -> Vec<&'static str> {
    report.violations.iter().map(Violation::kind).collect()
}

#[test]
fn a_clean_handover_passes() {
    let a = history("a", vec![lease(1, 1, 0, vec![id(TS, 1, 0), id(TS, 1, 1)])]);
    let b = history(
        "b",
        vec![
            lease(1, 2, 200, vec![id(TS + 5, 1, 0)]),
            lease(2, 1, 400, vec![id(TS + 6, 2, 0)]),
        ],
    );
    let report = run(vec![a, b]);
    assert!(report.is_safe(), "{report}");
    assert_eq!(
        (report.clients, report.leases, report.ids, report.handovers),
        (2, 3, 4, 1)
    );
}

#[test]
fn overlapping_holders_are_caught() {
    let a = history("a", vec![lease(1, 1, 0, vec![id(TS, 1, 0)])]);
    // b's join returned at 6 ms, before a's last ID (asked for at 10 ms).
    let b = history("b", vec![lease(1, 2, 5, vec![id(TS + 1, 1, 0)])]);
    let report = run(vec![a, b]);
    assert_eq!(kinds(&report), vec!["overlap"], "{report}");
    assert!(report.to_string().contains("overlap"));
}

/// `history`, of a client on a ticking clock.
fn ticking(client: &str, leases: Vec<Lease>) -> ClientHistory {
    let mut h = history(client, leases);
    h.events.insert(
        0,
        Event::Start {
            client: client.into(),
            pid: 1,
            unsafe_mode: false,
            ticking: true,
            at: 0,
            offset_ms: 0,
            rate_ppm: 0,
        },
    );
    h
}

#[test]
fn a_thawed_ticking_holder_is_judged_by_timestamp_not_by_overlap() {
    // a, on a ticking clock, issues after b's join returned, with older
    // timestamps: no overlap. Its IDs above b's are caught as went-back.
    let a = ticking("a", vec![lease(1, 1, 0, vec![id(TS, 1, 0)])]);
    let b = history("b", vec![lease(1, 2, 5, vec![id(TS + 1, 1, 0)])]);
    let report = run(vec![a, b]);
    assert!(kinds(&report).is_empty(), "{report}");
    let a = ticking("a", vec![lease(1, 1, 0, vec![id(TS + 2, 1, 0)])]);
    let b = history("b", vec![lease(1, 2, 5, vec![id(TS + 1, 1, 0)])]);
    let report = run(vec![a, b]);
    assert_eq!(kinds(&report), vec!["went-back"], "{report}");
}

#[test]
fn duplicate_ids_are_caught_across_worker_ids_too() {
    let a = history("a", vec![lease(1, 1, 0, vec![id(TS, 1, 0)])]);
    let b = history("b", vec![lease(2, 1, 0, vec![id(TS, 1, 0)])]);
    let report = run(vec![a, b]);
    assert!(kinds(&report).contains(&"duplicate-id"), "{report}");
    assert!(kinds(&report).contains(&"wrong-worker-id"), "{report}");
}

#[test]
fn an_id_after_the_deadline_is_caught() {
    let mut l = lease(1, 1, 0, vec![id(TS, 1, 0)]);
    l.batches[0].0 = l.deadline; // asked for exactly at the deadline
    let report = run(vec![history("a", vec![l])]);
    assert_eq!(kinds(&report), vec!["after-deadline"], "{report}");
}

#[test]
fn an_id_beyond_the_reserved_window_is_caught() {
    let mut l = lease(1, 1, 0, vec![id(TS, 1, 0), id(TS + 10, 1, 0)]);
    l.window = TS + 9;
    let report = run(vec![history("a", vec![l])]);
    assert_eq!(kinds(&report), vec!["beyond-window"], "{report}");
}

#[test]
fn ids_that_do_not_rise_within_a_lease_are_caught() {
    let l = lease(1, 1, 0, vec![id(TS, 1, 1), id(TS, 1, 1)]);
    let report = run(vec![history("a", vec![l])]);
    assert_eq!(kinds(&report), vec!["not-rising"], "{report}");
}

#[test]
fn a_later_holder_going_back_in_time_is_caught() {
    let a = history("a", vec![lease(1, 1, 0, vec![id(TS + 50, 1, 0)])]);
    let b = history("b", vec![lease(1, 2, 200, vec![id(TS + 10, 1, 0)])]);
    let report = run(vec![a, b]);
    assert_eq!(kinds(&report), vec!["went-back"], "{report}");
}

#[test]
fn fences_that_do_not_rise_are_caught() {
    let a = history("a", vec![lease(1, 5, 0, vec![id(TS, 1, 0)])]);
    let b = history("b", vec![lease(1, 5, 200, vec![id(TS + 10, 1, 0)])]);
    let report = run(vec![a, b]);
    assert_eq!(kinds(&report), vec!["fence-not-rising"], "{report}");
}

#[test]
fn ids_without_a_grant_are_caught() {
    let mut h = history("a", vec![lease(1, 1, 0, vec![id(TS, 1, 0)])]);
    h.events.remove(0);
    let report = run(vec![h]);
    assert_eq!(kinds(&report), vec!["orphan"], "{report}");
}

#[test]
fn only_the_first_violation_of_a_kind_per_lease_is_listed() {
    let mut l = lease(1, 1, 0, vec![id(TS, 1, 0)]);
    l.batches = (0..5)
        .map(|i| (l.deadline + i, vec![id(TS + i, 1, 0)]))
        .collect();
    let report = run(vec![history("a", vec![l])]);
    assert_eq!(report.count("after-deadline"), 1, "{report}");
}

#[test]
fn a_forgetful_restart_excuses_rules_between_holders_only_across_it() {
    // After a restart that forgot everything: the fence starts again and
    // the new holder went back in time, and a holder issued after its
    // deadline.
    let a = history("a", vec![lease(1, 3, 0, vec![id(TS + 50, 1, 0)])]);
    let mut late = lease(1, 1, 200, vec![id(TS + 10, 1, 0)]);
    late.batches
        .push((late.deadline + 5, vec![id(TS + 11, 1, 0)]));
    let b = history("b", vec![late]);
    let histories = vec![a, b];
    let strict = check(&histories, &CheckOptions::new(layout()));
    assert_eq!(strict.violations.len(), 3, "{strict}");

    let mut options = CheckOptions::new(layout());
    options.forgetful_restarts = vec![150 * MS];
    let lenient = check(&histories, &options);
    assert_eq!(kinds(&lenient), vec!["after-deadline"], "{lenient}");
    assert_eq!(lenient.excused.len(), 2, "{lenient}");

    // A restart after both grants excuses nothing.
    options.forgetful_restarts = vec![300 * MS];
    assert_eq!(check(&histories, &options).violations.len(), 3);
}
