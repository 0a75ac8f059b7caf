//! Two real OS processes share one SQLite file and a pool of one worker ID,
//! and hand it over while their clocks disagree: the first runs 1.5 s ahead,
//! the second 1.5 s behind. The union of their IDs has no duplicate, and every
//! ID of the second is above every ID of the first.
//!
//! The test binary runs itself as the child processes (`handover_child`, which
//! does nothing unless `WORKERID_HANDOVER_CHILD` is set).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use workerid_core::{Allocator, LeaseOptions};
use workerid_snowflake::{OffsetClock, SystemClock, Worker, WorkerOptions};
use workerid_sql::SqlStore;

const CHILD: &str = "WORKERID_HANDOVER_CHILD";

/// In a child: `<sqlite url>|<clock offset ms>|<output file>`.
#[test]
fn handover_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (url, offset, out) = (parts[0], parts[1].parse::<i64>().unwrap(), parts[2]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ttl = Duration::from_secs(2);
        let options = LeaseOptions::new()
            .max_worker_id(0)
            .max_lease_time(ttl)
            .ttl(ttl);
        let store = SqlStore::connect(url).await.unwrap();
        let allocator = Allocator::new(store, "handover", options).unwrap();
        let clock = Arc::new(OffsetClock::new(SystemClock::new(), offset));
        let worker = Worker::join(allocator, WorkerOptions::new().clock(clock))
            .await
            .unwrap();
        let mut ids = Vec::new();
        let until = Instant::now() + Duration::from_millis(900); // past one renewal
        while Instant::now() < until {
            for _ in 0..100 {
                ids.push(worker.next_id().unwrap());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        worker.stop().await;
        let text: Vec<String> = ids.iter().map(u64::to_string).collect();
        std::fs::write(out, text.join("\n")).unwrap();
    });
}

fn run_child(url: &str, offset_ms: i64, out: &std::path::Path) -> Vec<u64> {
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "handover_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, format!("{url}|{offset_ms}|{}", out.display()))
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the child with clock offset {offset_ms} ms failed"
    );
    let text = std::fs::read_to_string(out).unwrap();
    text.lines().map(|l| l.parse().unwrap()).collect()
}

#[test]
fn two_processes_hand_a_worker_id_over_while_their_clocks_disagree() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = workerid_testkit::sqlite_url(&dir.path().join("ids.db"));
    let ahead = run_child(&url, 1_500, &dir.path().join("ahead.txt"));
    let behind = run_child(&url, -1_500, &dir.path().join("behind.txt"));
    assert!(
        ahead.len() > 1_000 && behind.len() > 1_000,
        "{} and {} IDs",
        ahead.len(),
        behind.len()
    );
    let top = *ahead.iter().max().unwrap();
    assert!(
        behind.iter().all(|id| *id > top),
        "the second holder went back in time"
    );
    let mut all: Vec<u64> = ahead.iter().chain(behind.iter()).copied().collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs across the two processes");
}
