//! The store's key layout at its edges, on a real `redis-server` (started
//! once for this test binary, or the one `WORKERID_REDIS_URL` names): data
//! written by an older version, and lease ends too far away for Lua's
//! default number format.

use std::time::Duration;

use workerid_core::{Error, LeaseState, LeaseStore, Namespace, Token, WorkerId};
use workerid_redis::RedisStore;

async fn store() -> RedisStore {
    RedisStore::connect(&workerid_testkit::redis::shared_url())
        .await
        .expect("connect to Redis")
}

/// A namespace name no other test uses.
fn namespace(what: &str) -> Namespace {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    Namespace::new(format!("layout-{what}-{}-{nanos}", std::process::id())).expect("namespace")
}

#[tokio::test]
async fn a_namespace_written_by_an_older_version_is_refused_not_misread() {
    let store = store().await;
    let ns = namespace("old");
    // The layout before lease ends moved into the state: "<token> <fence>
    // <watermark>", ends in µs in the sorted set, no format marker. IDs 0 and
    // 1 expired long ago; read as ms, their ends would be live for millennia.
    let client = redis::Client::open(workerid_testkit::redis::shared_url()).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let hash = format!("workerid:{{{ns}}}");
    let token = Token::generate().to_string();
    let () = redis::cmd("HSET")
        .arg(&hash)
        .arg(&["max", "3", "next", "2"][..])
        .arg(&["0", &format!("{token} 1 0"), "1", &format!("{token} 1 0")][..])
        .query_async(&mut conn)
        .await
        .expect("write the old layout");
    let ended_us = "1700000000000000"; // November 2023, in µs
    let () = redis::cmd("ZADD")
        .arg(format!("{hash}:free"))
        .arg(&[ended_us, "0", ended_us, "1"][..])
        .query_async(&mut conn)
        .await
        .expect("write the old layout");
    for _ in 0..3 {
        match store
            .acquire(&ns, 3, &Token::generate(), Duration::from_secs(10))
            .await
        {
            Err(Error::Unavailable { .. }) => {}
            other => panic!("an old namespace must be refused, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_lease_ending_in_millennia_still_renews_releases_and_lists() {
    let store = store().await;
    let ns = namespace("far");
    // 10 000 years: past 10^14 ms, where Lua's tostring turns to 1e+14.
    let ttl = Duration::from_secs(10_000 * 365 * 86_400);
    let token = Token::generate();
    let grant = store.acquire(&ns, 7, &token, ttl).await.expect("acquire");
    for watermark in [5, 3, u64::MAX] {
        store
            .renew(&ns, grant.id, &token, ttl, watermark)
            .await
            .expect("renew");
    }
    let listing = store.list(&ns).await.expect("list");
    let lease = &listing.leases[0];
    assert_eq!(lease.id, grant.id);
    assert_eq!(lease.watermark, u64::MAX);
    match lease.state {
        LeaseState::Live { remaining } => assert!(remaining > ttl - Duration::from_secs(60)),
        other => panic!("the lease must be live, got {other:?}"),
    }
    store
        .release(&ns, grant.id, &token, 0)
        .await
        .expect("release");
    let again = store
        .acquire(&ns, 7, &Token::generate(), ttl)
        .await
        .expect("acquire again");
    assert_eq!(
        (again.id, again.fence, again.previous_watermark),
        (WorkerId::from(0), 2, u64::MAX)
    );
}
