//! Fault tests on Redis servers of their own: killed, paused, restarted with
//! and without persistence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use workerid_conformance::{scenarios, segments, Outcome, SegmentFactory, StoreFactory};
use workerid_core::compat::LibxCompat;
use workerid_core::{Allocator, Error, LeaseStore};
use workerid_redis::RedisStore;
use workerid_segment::SegmentStore;
use workerid_testkit::redis::{RedisConfig, RedisServer};

mod support;
use support::{options, retry_unavailable};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_unavailable_never_a_false_success_and_the_store_recovers() {
    let server = RedisServer::start(RedisConfig::default());
    let allocator = Allocator::new(
        RedisStore::connect(&server.url()).await.unwrap(),
        "kill",
        options(),
    )
    .unwrap();
    let mut lease = allocator.acquire().await.unwrap();

    server.process().kill();
    for _ in 0..3 {
        let started = Instant::now();
        let renew = allocator.renew(&mut lease).await;
        assert!(
            matches!(renew, Err(Error::Unavailable { .. })),
            "renew on a dead server: {renew:?}"
        );
        let acquire = allocator.acquire().await;
        assert!(
            matches!(acquire, Err(Error::Unavailable { .. })),
            "acquire on a dead server: {acquire:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "a dead server must fail fast"
        );
    }

    server.process().start();
    let fresh = retry_unavailable(|| allocator.acquire()).await;
    fresh.expect("the store recovers when the server is back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_is_unavailable_within_the_request_timeout() {
    let server = RedisServer::start(RedisConfig::default());
    let store = RedisStore::builder()
        .request_timeout(Duration::from_millis(500))
        .connect(&server.url())
        .await
        .unwrap();
    let allocator = Allocator::new(store, "pause", options()).unwrap();
    let mut lease = allocator.acquire().await.unwrap();

    server.process().pause();
    let started = Instant::now();
    let renew = allocator.renew(&mut lease).await;
    let waited = started.elapsed();
    server.process().resume();
    assert!(
        matches!(renew, Err(Error::Unavailable { .. })),
        "renew on a frozen server: {renew:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "waited {waited:?} for a frozen server"
    );

    let (id, token) = (u64::from(lease.id()), lease.token().to_string());
    retry_unavailable(|| allocator.renew_id(id, &token))
        .await
        .expect("the lease is still live once the server thaws");
}

/// A dedicated persistent server that the durability scenario may kill -9 and start again.
struct Persistent(RedisServer);

#[async_trait]
impl StoreFactory for Persistent {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        let store = RedisStore::builder()
            .durable(true)
            .connect(&self.0.url())
            .await;
        Arc::new(store.expect("connect to the persistent server"))
    }
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        tokio::task::block_in_place(|| {
            self.0.process().kill(); // a crash, not a clean shutdown
            self.0.process().start();
        });
    }
}

#[async_trait]
impl SegmentFactory for Persistent {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        let store = RedisStore::builder()
            .durable(true)
            .connect(&self.0.url())
            .await;
        Arc::new(store.expect("connect to the persistent server"))
    }
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        StoreFactory::restart(self).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_persistence_leases_fences_and_watermarks_survive_a_crash() {
    let factory = Persistent(RedisServer::start(RedisConfig {
        persistence: true,
        ..RedisConfig::default()
    }));
    assert_eq!(scenarios::survives_restart(&factory).await, Outcome::Passed);
    assert_eq!(
        segments::ranges_survive_a_restart(&factory).await,
        Outcome::Passed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_persistence_the_store_says_so_and_a_restart_forgets() {
    let server = RedisServer::start(RedisConfig::default());
    let store = RedisStore::connect(&server.url()).await.unwrap();
    assert!(
        !store.capabilities().durable,
        "a store not declared durable says so"
    );
    let allocator = Allocator::new(store, "volatile", options()).unwrap();
    let lease = allocator.acquire().await.unwrap();
    let (id, token) = (u64::from(lease.id()), lease.token().to_string());

    server.process().restart();
    let renew = retry_unavailable(|| allocator.renew_id(id, &token)).await;
    assert!(
        matches!(renew, Err(Error::NotAssigned { .. })),
        "after a restart without persistence: {renew:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_claim_the_server_denies_is_refused() {
    let server = RedisServer::start(RedisConfig::default());
    let refused = RedisStore::builder()
        .durable(true)
        .connect(&server.url())
        .await;
    match refused {
        Err(Error::InvalidConfig { reason }) => assert!(reason.contains("appendonly"), "{reason}"),
        other => panic!("durable on a server without persistence: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_and_unreachable_servers_are_typed_errors() {
    for bad in ["not a url", "http://127.0.0.1/"] {
        let answer = RedisStore::connect(bad).await;
        assert!(
            matches!(answer, Err(Error::InvalidConfig { .. })),
            "{bad}: {answer:?}"
        );
    }
    let prefix = RedisStore::builder()
        .key_prefix("{bad}")
        .connect("redis://127.0.0.1:1/")
        .await;
    assert!(
        matches!(prefix, Err(Error::InvalidConfig { .. })),
        "{prefix:?}"
    );

    let closed = workerid_testkit::free_port();
    let started = Instant::now();
    let answer = RedisStore::builder()
        .connect_timeout(Duration::from_millis(500))
        .connect(&format!("redis://127.0.0.1:{closed}/"))
        .await;
    assert!(
        matches!(answer, Err(Error::Unavailable { .. })),
        "{answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}
