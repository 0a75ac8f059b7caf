//! The store's key layout at its edges, on a real `redis-server` (started
//! once for this test binary, or the one `WORKERID_REDIS_URL` names): lease
//! ends too far away for Lua's default number format; and a server that may
//! evict the keys (one of its own).

use std::time::Duration;

use workerid_core::{Holder, LeaseState, LeaseStore, Namespace, Token, WorkerId};
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
async fn a_lease_ending_in_millennia_still_renews_releases_and_lists() {
    let store = store().await;
    let ns = namespace("far");
    // 10 000 years: past 10^14 ms, where Lua's tostring turns to 1e+14.
    let ttl = Duration::from_secs(10_000 * 365 * 86_400);
    let token = Token::generate();
    let grant = store
        .acquire(&ns, 7, &token, ttl, &Holder::default())
        .await
        .expect("acquire");
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
        .acquire(&ns, 7, &Token::generate(), ttl, &Holder::default())
        .await
        .expect("acquire again");
    assert_eq!(
        (again.id, again.fence, again.previous_watermark),
        (WorkerId::from(0), 2, u64::MAX)
    );
}

/// A namespace forgotten by the server (a restart without persistence, a
/// FLUSHALL) and made again by the next grant is listed again, although
/// this store handle had registered it before.
#[tokio::test]
async fn a_namespace_made_again_after_the_server_forgot_it_is_listed() {
    let server = workerid_testkit::redis::RedisServer::start(
        workerid_testkit::redis::RedisConfig::default(),
    );
    let store = RedisStore::connect(&server.url()).await.expect("connect");
    let ns = namespace("again");
    let token = Token::generate();
    store
        .acquire(&ns, 3, &token, Duration::from_secs(10), &Holder::default())
        .await
        .expect("acquire");
    let client = redis::Client::open(server.url()).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut conn)
        .await
        .expect("flush");
    store
        .acquire(
            &ns,
            3,
            &Token::generate(),
            Duration::from_secs(10),
            &Holder::default(),
        )
        .await
        .expect("acquire again");
    let listed = store.list_namespaces().await.expect("list namespaces");
    assert!(
        listed.iter().any(|n| n.namespace == ns && n.live == 1),
        "{listed:?}"
    );
}

/// A server that may evict any key when it is full is refused at connect,
/// before any lease is taken; one that evicts only keys with a ttl (the
/// store's have none) is not.
#[tokio::test]
async fn a_server_that_evicts_any_key_is_refused() {
    use workerid_testkit::redis::{RedisConfig, RedisServer};

    let server = RedisServer::start(RedisConfig::default());
    let client = redis::Client::open(server.url()).expect("a client");
    let mut admin = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let set = |name: &'static str, value: &'static str| {
        redis::cmd("CONFIG").arg("SET").arg(name).arg(value).clone()
    };
    set("maxmemory", "1gb")
        .query_async::<()>(&mut admin)
        .await
        .expect("CONFIG SET");
    for (policy, refused) in [
        ("allkeys-lru", true),
        ("allkeys-random", true),
        ("volatile-lru", false),
        ("noeviction", false),
    ] {
        set("maxmemory-policy", policy)
            .query_async::<()>(&mut admin)
            .await
            .expect("CONFIG SET");
        let connected = RedisStore::connect(&server.url()).await;
        match connected {
            Err(workerid_core::Error::InvalidConfig { reason }) if refused => {
                assert!(reason.contains(policy), "{reason}")
            }
            Ok(_) if !refused => {}
            other => panic!("{policy}: {other:?}"),
        }
    }
}
