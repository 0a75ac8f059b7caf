//! workerid-client when its server goes away: killed, restarted, frozen
//! past the request timeout, or silent behind a connection that still
//! takes bytes. Every call meanwhile is `Unavailable` (never a
//! success the server did not confirm); once the server is back the same
//! store handle works again; no worker ID gets two holders and no segment
//! ID comes out twice.

mod client;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use workerid::segment::{SegmentAllocator, SegmentOptions};
use workerid::{Allocator, LeaseOptions};
use workerid_client::ServerStore;
use workerid_testkit::relay::Relay;

async fn store(url: &str) -> ServerStore {
    ServerStore::builder(url)
        .request_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect("connect")
}

/// Retries `call` until it succeeds (at most 20 s), checking that every
/// failure meanwhile is retryable.
macro_rules! until_ok {
    ($call:expr) => {{
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match $call.await {
                Ok(answer) => break answer,
                Err(e) => {
                    assert!(e.is_retryable(), "not Unavailable: {e}");
                    assert!(Instant::now() < deadline, "never answered again: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }};
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_outlives_its_servers_restart_and_freeze() {
    let (server, url) = client::launch(&client::sqlite_file());
    let options = LeaseOptions::new()
        .worker_bits(1)
        .ttl(Duration::from_secs(30))
        .request_timeout(Duration::from_secs(2));
    let allocator = Allocator::new(store(&url).await, "restarts", options.clone()).unwrap();
    let mut lease = allocator.acquire().await.unwrap();

    server.kill();
    let refused = allocator.renew(&mut lease).await.unwrap_err();
    assert!(refused.is_retryable(), "{refused}");
    server.start();
    until_ok!(allocator.renew(&mut lease));

    server.pause();
    let started = Instant::now();
    let late = allocator.renew(&mut lease).await.unwrap_err();
    assert!(late.is_retryable(), "{late}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "bounded by the timeouts"
    );
    server.resume();
    until_ok!(allocator.renew(&mut lease));

    // The lease held through it all: another client gets the other ID, and
    // then none.
    let other = Allocator::new(store(&url).await, "restarts", options).unwrap();
    let second = other.acquire().await.unwrap();
    assert_ne!(second.id(), lease.id());
    assert!(matches!(
        other.acquire().await,
        Err(workerid::Error::NoAvailableId { .. })
    ));
    allocator.release(&lease).await.unwrap();
}

/// A connection that goes silent (its bytes acknowledged but never passed
/// on, as by a load balancer or NAT that forgot the server) is closed when
/// its keep-alive ping goes unanswered, and the next call opens a new one:
/// renewals fail for a moment, not until the kernel gives up on the
/// connection a quarter of an hour later.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_connection_is_given_up_and_replaced() {
    let (_server, url) = client::launch(&client::sqlite_file());
    let (relay, relayed) = Relay::in_front_of(&url);
    let store = ServerStore::builder(relayed)
        .request_timeout(Duration::from_secs(1))
        .keep_alive_interval(Duration::from_millis(500))
        .keep_alive_timeout(Duration::from_millis(500))
        .connect()
        .await
        .expect("connect");
    let options = LeaseOptions::new()
        .worker_bits(1)
        .ttl(Duration::from_secs(30))
        .request_timeout(Duration::from_secs(2));
    let allocator = Allocator::new(store, "silent", options).unwrap();
    let mut lease = allocator.acquire().await.unwrap();

    relay.silence_connections();
    let lost = allocator.renew(&mut lease).await.unwrap_err();
    assert!(lost.is_retryable(), "{lost}");
    until_ok!(allocator.renew(&mut lease));
    allocator.release(&lease).await.unwrap();
    relay.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn segment_ids_never_repeat_across_a_servers_restart() {
    let (server, url) = client::launch(&client::sqlite_file());
    let segments = SegmentAllocator::new(store(&url).await, SegmentOptions::default());
    segments.create_tag("restarts", 1, 10).await.unwrap();
    let mut seen = HashSet::new();
    let mut last = 0;
    let mut take = |id: u64| {
        assert!(seen.insert(id), "{id} came out twice");
        assert!(id > last, "{id} after {last}");
        last = id;
    };
    for _ in 0..25 {
        take(segments.next_id("restarts").await.unwrap());
    }
    server.kill();
    // The buffers still serve (their steps grow with the rate, so they may
    // hold many); once they are spent, Unavailable.
    let mut failed = false;
    for _ in 0..10_000_000 {
        match segments.next_id("restarts").await {
            Ok(id) => take(id),
            Err(e) => {
                assert!(e.is_retryable(), "{e}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "a dead server cannot serve ten million IDs");
    server.start();
    for _ in 0..25 {
        take(until_ok!(segments.next_id("restarts")));
    }
}
