//! The service checker on hand-made histories: each rule holds on a clean
//! one and is reported when broken.

use std::time::Duration;

use workerid::snowflake::Layout;

use super::*;

const MS: u64 = 1_000_000;

fn options(servers: usize, acknowledged: u64) -> ServiceCheckOptions {
    ServiceCheckOptions {
        layout: Layout::classic(),
        ttl: Duration::from_secs(2),
        recovery_bound: Duration::from_secs(4),
        servers,
        serving: servers,
        acknowledged,
    }
}

fn snowflake(server: usize, worker_id: u32, ts: u64, sent: u64) -> Received {
    Received {
        server,
        endpoint: Endpoint::LeafSnowflake,
        tag: String::new(),
        id: Layout::classic().compose(ts, worker_id, 0),
        sent,
        received: sent + MS,
    }
}

fn segment(server: usize, tag: &str, id: u64, sent: u64) -> Received {
    Received {
        server,
        endpoint: Endpoint::Alloc,
        tag: tag.into(),
        id,
        sent,
        received: sent + MS,
    }
}

fn poll(at: u64, live: &[u32]) -> LeasePoll {
    LeasePoll {
        sent: at,
        received: at + MS,
        live: live.to_vec(),
    }
}

#[test]
fn a_clean_history_breaks_no_rule() {
    let ids = vec![
        segment(0, "a", 1, 10 * MS),
        segment(1, "a", 51, 11 * MS),
        segment(1, "b", 1, 12 * MS),
        snowflake(0, 3, 100, 20 * MS),
        snowflake(1, 3, 101, 40 * MS),
        snowflake(1, 4, 100, 41 * MS),
    ];
    let polls: Vec<LeasePoll> = (0..10).map(|i| poll(i * 10 * MS, &[3, 4])).collect();
    let faults = [FaultEnd {
        kind: "KillServer".into(),
        at: 15 * MS,
        next: 100 * MS,
    }];
    let report = check_service(&ids, &polls, &faults, &options(2, 6));
    assert!(report.is_safe(), "{report}");
    assert_eq!((report.segment_ids, report.snowflake_ids), (3, 3));
    assert_eq!(report.judged_live, 3);
    assert_eq!(report.shared_worker_ids, 1);
    assert_eq!(
        report.worst_recovery.get("KillServer"),
        Some(&Some(Duration::from_millis(26)))
    );
}

#[test]
fn every_broken_rule_is_reported() {
    let ids = vec![
        segment(0, "a", 7, 10 * MS),
        segment(1, "a", 7, 11 * MS),
        // The same ID of another tag is fine.
        segment(1, "b", 7, 12 * MS),
        snowflake(0, 3, 200, 20 * MS),
        snowflake(1, 3, 200, 30 * MS),
        // Received after 200 was, and smaller.
        snowflake(1, 3, 150, 40 * MS),
        // Worker ID 6 was never listed live.
        snowflake(0, 6, 300, 50 * MS),
    ];
    let polls: Vec<LeasePoll> = (0..10).map(|i| poll(i * 10 * MS, &[3])).collect();
    let faults = [FaultEnd {
        kind: "PauseServer".into(),
        at: 60 * MS,
        next: 10_000 * MS,
    }];
    let report = check_service(&ids, &polls, &faults, &options(2, 9));
    for kind in [
        "duplicate-segment-id",
        "duplicate-snowflake-id",
        "went-back",
        "not-live",
        "lost",
    ] {
        assert_eq!(report.count(kind), 1, "{kind}: {report}");
    }
    // Neither server served a snowflake ID after the fault.
    assert_eq!(report.count("slow-recovery"), 2, "{report}");
    assert_eq!(report.worst_recovery.get("PauseServer"), Some(&None));
}

#[test]
fn liveness_and_recovery_are_judged_only_where_the_evidence_allows() {
    // Listings 3 s apart (more than a ttl): a lease may have come and gone
    // between them, so the ID is not judged.
    let ids = vec![snowflake(0, 6, 300, 1_500 * MS)];
    let polls = vec![poll(0, &[]), poll(3_000 * MS, &[])];
    // The next fault began before the server served and before the bound.
    let faults = [FaultEnd {
        kind: "KillServer".into(),
        at: 1_000 * MS,
        next: 1_200 * MS,
    }];
    let report = check_service(&ids, &polls, &faults, &options(1, 1));
    assert!(report.is_safe(), "{report}");
    assert_eq!(report.judged_live, 0);
    assert!(report.worst_recovery.is_empty());
}

#[test]
fn in_a_tight_pool_the_first_servers_to_serve_are_judged() {
    // Three servers, a pool of two: after the fault server 0 serves at
    // once, server 2 within the bound, server 1 (waiting for a worker ID)
    // never.
    let ids = vec![
        snowflake(0, 0, 100, 1_100 * MS),
        snowflake(2, 1, 101, 3_000 * MS),
    ];
    let polls: Vec<LeasePoll> = (0..40).map(|i| poll(i * 100 * MS, &[0, 1])).collect();
    let faults = [FaultEnd {
        kind: "CutServerFromStore".into(),
        at: 1_000 * MS,
        next: 10_000 * MS,
    }];
    let tight = ServiceCheckOptions {
        serving: 2,
        ..options(3, 2)
    };
    let report = check_service(&ids, &polls, &faults, &tight);
    assert!(report.is_safe(), "{report}");
    assert_eq!(
        report.worst_recovery.get("CutServerFromStore"),
        Some(&Some(Duration::from_millis(2_001)))
    );
    // Teeth: every server judged, the waiting one is too slow; and in the
    // tight pool, a second server that serves only after the bound is.
    let all = check_service(&ids, &polls, &faults, &options(3, 2));
    assert_eq!(all.count("slow-recovery"), 1, "{all}");
    let late = vec![
        snowflake(0, 0, 100, 1_100 * MS),
        snowflake(2, 1, 101, 6_000 * MS),
    ];
    let report = check_service(&late, &polls, &faults, &tight);
    assert_eq!(report.count("slow-recovery"), 1, "{report}");
}
