use super::*;
use crate::timeline::Touched;

const S: u64 = 1_000_000_000;

/// A client of lab 0 that started at 0, issued at each of `issued` (s)
/// and ran until 100 s.
fn client(issued: &[u64]) -> ClientHistory {
    let mut events = vec![Event::Start {
        client: "c000".into(),
        pid: 1,
        unsafe_mode: false,
        ticking: false,
        at: 0,
        offset_ms: 0,
        rate_ppm: 0,
    }];
    events.extend(issued.iter().map(|&at| Event::Ids {
        lease: 0,
        t0: at * S,
        tl: at * S,
        t1: at * S,
        deadline: (at + 2) * S,
        window_end: 0,
        ids: vec![at],
    }));
    events.push(Event::Stopping {
        lease: 0,
        at: 100 * S,
    });
    ClientHistory {
        client: "c000".into(),
        events,
    }
}

fn window(began: u64) -> FaultWindow {
    FaultWindow {
        kind: "DropReplies".into(),
        began: began * S,
        ended: (began + 3) * S,
        touched: Touched::Lab(0),
    }
}

/// Heal at 10 s; the client issues again at `issued`; the next fault
/// begins at `next`; bound 4 s: (judged, slow, after in s).
fn judge(issued: u64, next: Option<u64>) -> (bool, bool, u64) {
    let heal = Heal {
        fault: Fault::DropReplies,
        lab: 0,
        at: 10 * S,
    };
    let windows: Vec<FaultWindow> = next.into_iter().map(window).collect();
    let recoveries = liveness(
        &[client(&[5, issued])],
        &[heal],
        &windows,
        |_| Some(0),
        Duration::from_secs(6),
        Duration::from_secs(4),
        false,
    );
    assert_eq!(recoveries.len(), 1);
    let r = &recoveries[0];
    (r.judged, r.slow, r.after.map_or(u64::MAX, |d| d.as_secs()))
}

#[test]
fn a_recovery_is_judged_unless_the_next_fault_cut_it_short() {
    // No later fault, or one after the client issued: judged.
    assert_eq!(judge(12, None), (true, false, 2));
    assert_eq!(judge(12, Some(13)), (true, false, 2));
    // A slow recovery with time enough before the next fault: judged,
    // and past the bound.
    assert_eq!(judge(17, Some(15)), (true, true, 7));
    assert_eq!(judge(17, None), (true, true, 7));
    // The next fault began 1 s after the heal, before the client
    // issued: not judged.
    assert_eq!(judge(17, Some(11)), (false, false, 7));
    let summary = summarize(&liveness(
        &[client(&[5, 17])],
        &[Heal {
            fault: Fault::DropReplies,
            lab: 0,
            at: 10 * S,
        }],
        &[window(11)],
        |_| Some(0),
        Duration::from_secs(6),
        Duration::from_secs(4),
        false,
    ));
    assert!(summary.contains("not judged: 1"), "{summary}");
    assert!(!summary.contains("worst 7"), "{summary}");
    assert!(!summary.contains("past the bound"), "{summary}");
}

#[test]
fn a_client_silent_after_a_heal_is_stuck_when_a_quiet_stretch_followed() {
    let silent = |next: Option<u64>, until: u64| {
        let mut history = client(&[5]);
        if let Some(Event::Stopping { at, .. }) = history.events.last_mut() {
            *at = until * S;
        }
        let recoveries = liveness(
            &[history],
            &[Heal {
                fault: Fault::DropReplies,
                lab: 0,
                at: 10 * S,
            }],
            &next.into_iter().map(window).collect::<Vec<_>>(),
            |_| Some(0),
            Duration::from_secs(6),
            Duration::from_secs(4),
            false,
        );
        let summary = summarize(&recoveries);
        let r = recoveries[0].clone();
        assert_eq!(r.after, None);
        (r.judged, r.slow, r.stuck, summary)
    };
    // Heal at 10 s, bound 4 s. No fault after the heal, or one the
    // client had the bound before: judged, slow and stuck, and named.
    for next in [None, Some(15)] {
        let (judged, slow, stuck, summary) = silent(next, 100);
        assert_eq!((judged, slow, stuck), (true, true, true), "{next:?}");
        assert!(
            summary.contains("never issued again: c000 after the heal at"),
            "{summary}"
        );
    }
    // The next fault (11 s to 14 s) cut the recovery short, but the
    // client ran on long after it: not judged, yet stuck.
    let (judged, slow, stuck, summary) = silent(Some(11), 100);
    assert_eq!((judged, slow, stuck), (false, false, true));
    assert!(summary.contains("never issued again: c000"), "{summary}");
    // The same, the client ending at 17 s, before the bound had passed
    // after that fault: its silence says nothing.
    let (judged, slow, stuck, summary) = silent(Some(11), 17);
    assert_eq!((judged, slow, stuck), (false, false, false));
    assert!(!summary.contains("c000"), "{summary}");
    assert!(summary.contains("not judged: 1"), "{summary}");
}

#[test]
fn a_quiet_stretch_is_one_of_the_bound_without_any_fault() {
    let w = |began: u64, ended: u64| FaultWindow {
        kind: "DropReplies".into(),
        began: began * S,
        ended: ended * S,
        touched: Touched::Everyone,
    };
    let bound = Duration::from_secs(4);
    let quiet =
        |windows: &[FaultWindow], until: u64| quiet_stretch(windows, 10 * S, until * S, bound);
    assert!(quiet(&[], 14));
    assert!(!quiet(&[], 13));
    // Faults 1 s apart until 20 s, overlapping ones, then quiet.
    let chain = [w(11, 13), w(14, 16), w(15, 19), w(20, 22)];
    assert!(!quiet(&chain, 25));
    assert!(quiet(&chain, 26));
    // A gap of the bound between two faults.
    assert!(quiet(&[w(11, 12), w(16, 30)], 30));
    assert!(!quiet(&[w(11, 12), w(15, 30)], 30));
    // Faults before the heal or after the end do not count.
    assert!(quiet(&[w(1, 5), w(40, 50)], 14));
    // In any order; a fault inside a longer one; one that began before
    // the heal and ended after it; one that outlasts the client.
    assert!(!quiet(&[w(15, 30), w(11, 12)], 30));
    assert!(!quiet(&[w(11, 20), w(12, 13)], 23));
    assert!(quiet(&[w(11, 20), w(12, 13)], 24));
    assert!(!quiet(&[w(8, 12)], 15));
    assert!(quiet(&[w(8, 12)], 16));
    assert!(!quiet(&[w(11, 40)], 30));
}

/// Heal of lab 0 at 10 s (its own window 7 s to 10 s), bound 4 s; the
/// client c000 of lab 0 issues at `issued` (none if `None`) and runs
/// until 100 s; `others` are the run's other faults.
fn judged_among(issued: Option<u64>, others: &[FaultWindow]) -> Recovery {
    let mut windows = vec![FaultWindow {
        kind: "DropReplies".into(),
        began: 7 * S,
        ended: 10 * S + 1,
        touched: Touched::Lab(0),
    }];
    windows.extend_from_slice(others);
    let heal = Heal {
        fault: Fault::DropReplies,
        lab: 0,
        at: 10 * S,
    };
    let issued: Vec<u64> = [5].into_iter().chain(issued).collect();
    let recoveries = liveness(
        &[client(&issued)],
        &[heal],
        &windows,
        |name| name.get(1..)?.parse::<usize>().ok().map(|n| n % 2),
        Duration::from_secs(6),
        Duration::from_secs(4),
        false,
    );
    assert_eq!(recoveries.len(), 1);
    recoveries[0].clone()
}

fn fault(kind: &str, began: u64, ended: u64, touched: Touched) -> FaultWindow {
    FaultWindow {
        kind: kind.into(),
        began: began * S,
        ended: ended * S,
        touched,
    }
}

#[test]
fn a_client_paused_through_the_heal_is_judged_from_its_thaw() {
    // Paused from 8 s to 15 s, it issues at 16 s: 1 s after the thaw,
    // within the bound, though 6 s after the heal.
    let pause = fault("PauseClient", 8, 15, Touched::Client("c000".into()));
    let r = judged_among(Some(16), std::slice::from_ref(&pause));
    assert_eq!(r.held, Some(Duration::from_secs(5)));
    assert_eq!(r.after, Some(Duration::from_secs(1)));
    assert!(r.judged && !r.slow, "{r:?}");
    let summary = summarize(&[r]);
    assert!(summary.contains("judged from its end: 1"), "{summary}");
    assert!(
        summary.contains("after the end of the fault that held it"),
        "{summary}"
    );
    // Issuing 5 s after the thaw is slow all the same.
    let r = judged_among(Some(20), std::slice::from_ref(&pause));
    assert!(r.judged && r.slow, "{r:?}");
    // Silent after the thaw, with the bound free of faults: stuck.
    let r = judged_among(None, std::slice::from_ref(&pause));
    assert!(r.judged && r.slow && r.stuck, "{r:?}");
    // The pause of another client, or one that ended before the heal,
    // holds nothing up.
    for other in [
        fault("PauseClient", 8, 15, Touched::Client("c002".into())),
        fault("PauseClient", 1, 9, Touched::Client("c000".into())),
    ] {
        let r = judged_among(Some(16), &[other]);
        assert_eq!((r.held, r.after), (None, Some(Duration::from_secs(6))));
        assert!(r.judged && r.slow, "{r:?}");
    }
}

#[test]
fn only_faults_that_held_the_client_up_cut_its_recovery_short() {
    // A fault on another lab or another client 1 s after the heal
    // leaves the recovery judged, and the silent client stuck.
    for elsewhere in [
        fault("PartitionClients", 11, 14, Touched::Lab(1)),
        fault("PauseClient", 11, 14, Touched::Client("c001".into())),
        fault("KillClient", 11, 11, Touched::Client("c002".into())),
    ] {
        let r = judged_among(Some(17), std::slice::from_ref(&elsewhere));
        assert!(r.judged && r.slow, "{elsewhere:?}: {r:?}");
        let r = judged_among(
            None,
            &[
                elsewhere.clone(),
                fault("StepClock", 13, 13, Touched::Client("c004".into())),
            ],
        );
        assert!(r.stuck, "{elsewhere:?}: {r:?}");
    }
    // One on its lab, on it or on every client cuts it short, and
    // splits the quiet stretch.
    for here in [
        fault("LossyLink", 11, 14, Touched::Lab(0)),
        fault("PauseClient", 11, 14, Touched::Client("c000".into())),
        fault("RestartStore", 11, 14, Touched::Everyone),
    ] {
        let r = judged_among(Some(17), std::slice::from_ref(&here));
        assert!(!r.judged && !r.slow, "{here:?}: {r:?}");
        assert_eq!(r.next_fault, Some(Duration::from_secs(1)));
        let chain: Vec<FaultWindow> = (0..30)
            .map(|n| FaultWindow {
                began: (11 + 3 * n) * S,
                ended: (14 + 3 * n) * S,
                ..here.clone()
            })
            .collect();
        let r = judged_among(None, &chain);
        assert!(!r.stuck, "{here:?}: {r:?}");
    }
}

#[test]
fn in_a_tight_pool_a_recovery_is_judged_from_the_last_answer_that_every_id_was_held() {
    // Heal at 10 s, bound 4 s; the client issues at `issued` (none if
    // `None`), runs until 100 s and found every ID held at `full` (s).
    let judge = |issued: Option<u64>, full: &[u64], pool_is_tight: bool| {
        let mut history = client(&[5].into_iter().chain(issued).collect::<Vec<_>>());
        for (n, &at) in full.iter().enumerate() {
            history.events.insert(
                1 + n,
                Event::JoinFailed {
                    at: at * S,
                    error: "no available worker IDs: all of 0..=3 are held".into(),
                    pool_full: true,
                },
            );
        }
        let heal = Heal {
            fault: Fault::DropReplies,
            lab: 0,
            at: 10 * S,
        };
        let recoveries = liveness(
            &[history],
            &[heal],
            &[],
            |_| Some(0),
            Duration::from_secs(6),
            Duration::from_secs(4),
            pool_is_tight,
        );
        let r = recoveries[0].clone();
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs());
        let flags = (secs(r.waited_for_an_id), secs(r.after), r.slow, r.stuck);
        (flags, summarize(&[r]))
    };
    // Refused until 15 s, it issues at 17 s: 2 s after, judged and within
    // the bound, though 7 s after the heal.
    let (flags, summary) = judge(Some(17), &[11, 13, 15], true);
    assert_eq!(flags, (Some(5), Some(2), false, false));
    assert!(
        summary.contains("judged from the last refusal: 1"),
        "{summary}"
    );
    assert!(
        summary.contains("the last answer that every ID was held"),
        "{summary}"
    );
    // Refused last at 12 s, it issues at 17 s: slow all the same.
    assert_eq!(
        judge(Some(17), &[12], true).0,
        (Some(2), Some(5), true, false)
    );
    // Silent long after its last refusal: stuck; refused to its end: not.
    assert_eq!(judge(None, &[30], true).0, (Some(20), None, true, true));
    assert_eq!(
        judge(None, &[30, 98], true).0,
        (Some(88), None, true, false)
    );
    // In a pool with an ID for every client, or refused only before the
    // heal or after the first ID, the recovery runs from the heal.
    assert_eq!(
        judge(Some(17), &[15], false).0,
        (None, Some(7), true, false)
    );
    for full in [8, 18] {
        assert_eq!(
            judge(Some(17), &[full], true).0,
            (None, Some(7), true, false)
        );
    }
}

#[test]
fn a_fault_still_running_when_the_recovery_starts_cuts_it_short_at_once() {
    // Paused from 8 s to 15 s, its lab cut again from 12 s to 20 s (a
    // fault the loop could only inject with the pause running): the
    // recovery starts at 15 s with a fault on, and is not judged.
    let r = judged_among(
        Some(21),
        &[
            fault("PauseClient", 8, 15, Touched::Client("c000".into())),
            fault("PartitionClients", 12, 20, Touched::Lab(0)),
        ],
    );
    assert_eq!(r.next_fault, Some(Duration::ZERO));
    assert!(!r.judged && !r.slow, "{r:?}");
}
