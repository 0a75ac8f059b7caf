//! The snowflake worker comes back by itself: after the store froze past the
//! ttl, and after the store was killed and started again.

mod common;

use std::time::{Duration, Instant};

use common::{wait_for_status, Launch, Server};
use workerid_testkit::StoreKind;

const TTL: Duration = Duration::from_secs(3);
/// How soon after the store answers again a worker must serve: the brief's
/// bound, ttl + 2 s.
const RECOVERY: Duration = Duration::from_secs(5);

fn snowflake_server(dir: &std::path::Path, store: &str) -> Server {
    Server::launch(
        dir,
        store,
        &Launch {
            // The lease is under test; segments on this Redis are volatile.
            // The tag list is reread often, so that a frozen store has left
            // it stale long before the worker lapses.
            top: "allow_volatile_segments = true\ntags_refresh_ms = 300",
            tables: &format!("[snowflake]\nttl_secs = {}\n", TTL.as_secs()),
            ..Launch::default()
        },
    )
}

#[test]
fn the_worker_rejoins_after_a_frozen_store_and_after_a_store_restart() {
    let redis = StoreKind::Redis.start();
    let (_, process) = redis.processes().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let server = snowflake_server(dir.path(), &redis.url());
    assert_eq!(server.get("/api/snowflake/get/x").0, 200);

    // Frozen past the ttl: the worker fails closed, then comes back.
    process.pause();
    let frozen = Instant::now();
    let lapsed = wait_for_status(&server, "/api/snowflake/get/x", 500, TTL * 3);
    assert!(
        lapsed.is_some(),
        "the worker kept serving on a lease it could not renew:\n{}",
        server.log_text()
    );
    // The 503 names the cause: a store that does not answer, not a lease
    // someone else holds.
    let (status, why) = server.get("/readyz");
    assert_eq!(status, 503);
    assert!(
        why.contains("deadline passed before a renewal succeeded")
            || why.contains("reserved in the store ran out"),
        "/readyz with the store frozen: {why}"
    );
    assert!(!why.contains("tag list"), "a stale tag list counted: {why}");
    // A stale tag list is no reason to leave a balancer (segments are
    // served from memory), and a probe that leaves the worker out keeps
    // the server in.
    assert_eq!(server.get("/readyz?exclude=snowflake").0, 200);
    assert_eq!(server.get("/readyz?exclude=nothing").0, 400);
    std::thread::sleep((TTL + Duration::from_secs(2)).saturating_sub(frozen.elapsed()));
    process.resume();
    let back = wait_for_status(&server, "/api/snowflake/get/x", 200, RECOVERY * 3);
    println!(
        "after a {:?} freeze (ttl {TTL:?}): 503 after {:?}, serving again {back:?} after the thaw",
        frozen.elapsed(),
        lapsed.unwrap_or_default()
    );
    let back = back.unwrap_or_else(|| panic!("never served again:\n{}", server.log_text()));
    assert!(back <= RECOVERY, "back after {back:?}, over {RECOVERY:?}");
    assert!(server.metric("workerid_lease_losses_total") >= 1);
    assert_eq!(server.get("/readyz").0, 200);

    // Killed and started again (an empty store: the lease is gone with it).
    process.kill();
    let lapsed = wait_for_status(&server, "/api/snowflake/get/x", 500, TTL * 3);
    assert!(lapsed.is_some(), "served with the store dead past the ttl");
    assert_eq!(server.get("/readyz").0, 503, "not ready without a lease");
    process.start();
    let back = wait_for_status(&server, "/api/snowflake/get/x", 200, RECOVERY * 3);
    println!("after a kill -9 and a restart: serving again {back:?} after the store started");
    let back = back.unwrap_or_else(|| panic!("never served again:\n{}", server.log_text()));
    assert!(back <= RECOVERY, "back after {back:?}, over {RECOVERY:?}");
    assert!(server.metric("workerid_lease_joins_total") >= 3);
    assert_eq!(server.metric("workerid_lease_ready"), 1);

    // SIGTERM stops the supervisor and releases the lease: the next server
    // of a one-ID pool gets it at once rather than after the ttl.
    assert!(server.terminate().success());
}

#[test]
fn a_worker_that_could_not_start_joins_once_an_id_is_free() {
    // A pool of one worker ID: the second server cannot join while the first
    // holds it, and joins once the first, stopped, has released it (after
    // the clock passes the first one's reserved window, two renewal
    // periods: 2 s here).
    let store = StoreKind::Redis.shared_url();
    let namespace = format!("one-{}", std::process::id());
    let tables = format!(
        "[snowflake]\nttl_secs = 30\nrenew_every_ms = 1000\nmax_worker_id = 0\nnamespace = \"{namespace}\"\n"
    );
    let launch = Launch {
        top: "allow_volatile_segments = true",
        tables: &tables,
        ..Launch::default()
    };
    let (dir1, dir2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = Server::launch(dir1.path(), &store, &launch);
    assert_eq!(first.get("/api/snowflake/get/x").0, 200);
    let second = Server::launch(dir2.path(), &store, &launch);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(second.get("/api/snowflake/get/x").0, 500);
    assert!(second.metric("workerid_lease_join_failures_total") >= 1);
    assert_eq!(
        second.get("/alloc?biz_tag=test").0,
        200,
        "segments still served"
    );

    let stopped = Instant::now();
    assert!(first.terminate().success());
    let exited = stopped.elapsed();
    let back = wait_for_status(
        &second,
        "/api/snowflake/get/x",
        200,
        Duration::from_secs(20),
    );
    println!(
        "the second server joined {back:?} after the first exited ({exited:?} after SIGTERM), \
         with a ttl of 30 s"
    );
    let back = back.unwrap_or_else(|| panic!("never joined:\n{}", second.log_text()));
    assert!(
        back < Duration::from_secs(10),
        "SIGTERM released the worker ID: no wait for its 30 s ttl"
    );
    assert!(second.terminate().success());
}
