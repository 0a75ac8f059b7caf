//! Writes that wait for replicas (`wait_for_replicas`), on a master with a
//! replica and on a Redis Cluster with a replica per master: one scenario
//! for both. A write is answered once the replica of the master that
//! applied it has it; a replica that does not answer (paused) makes the
//! write `Unavailable`; asking for more replicas than the master has is
//! `Unavailable` too. On the cluster, only the replica of the master that
//! owns the namespace's slot is paused: a `WAIT` sent to any other node
//! would be answered by a healthy replica.

use std::future::Future;
use std::time::{Duration, Instant};

use workerid_core::compat::LibxCompat;
use workerid_core::{Allocator, Error, Result};
use workerid_redis::{RedisStore, RedisStoreBuilder};
use workerid_testkit::redis::RedisServer;
use workerid_testkit::redis_cluster::RedisReplicatedCluster;
use workerid_testkit::ServerProcess;

mod support;
use support::{options, retry_unavailable};

const NAMESPACE: &str = "waits";

fn assert_too_few_replicas<T: std::fmt::Debug>(what: &str, answer: Result<T>, reached: u32) {
    match answer {
        Err(Error::Unavailable { source, .. }) => assert!(
            source
                .to_string()
                .contains(&format!("the write reached {reached} of the")),
            "{what}: {source}"
        ),
        other => panic!("{what}: {other:?}"),
    }
}

/// The scenario: `connect(n)` opens the store waiting for `n` replicas;
/// `replica` is the replica of the master that holds [`NAMESPACE`].
async fn a_write_waits_for_the_replica_of_its_master<F, Fut>(connect: F, replica: &ServerProcess)
where
    F: Fn(RedisStoreBuilder) -> Fut,
    Fut: Future<Output = Result<RedisStore>>,
{
    let builder = || {
        RedisStore::builder()
            .durable(true)
            .request_timeout(Duration::from_secs(1))
    };
    let store = connect(builder().wait_for_replicas(1))
        .await
        .expect("connect");
    let allocator = Allocator::new(store, NAMESPACE, options()).unwrap();
    let mut lease = retry_unavailable(|| allocator.acquire())
        .await
        .expect("a grant the replica acknowledged");
    allocator
        .renew(&mut lease)
        .await
        .expect("a renewal the replica acknowledged");

    replica.pause();
    let started = Instant::now();
    let renew = allocator.renew(&mut lease).await;
    let acquire = allocator.acquire().await;
    let waited = started.elapsed();
    replica.resume();
    assert_too_few_replicas("renew with the replica paused", renew, 0);
    assert_too_few_replicas("acquire with the replica paused", acquire, 0);
    assert!(
        waited < Duration::from_secs(3),
        "two writes waited {waited:?} for a paused replica"
    );
    let (id, token) = (u64::from(lease.id()), lease.token().to_string());
    retry_unavailable(|| allocator.renew_id(id, &token))
        .await
        .expect("the lease renews once the replica is back");

    let greedy = connect(builder().wait_for_replicas(2))
        .await
        .expect("connect");
    let greedy = Allocator::new(greedy, NAMESPACE, options()).unwrap();
    assert_too_few_replicas(
        "acquire waiting for two replicas of a master that has one",
        greedy.acquire().await,
        1,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_master_with_a_replica() {
    let (master, replica) = RedisServer::start_durable_pair();
    let url = master.url();
    a_write_waits_for_the_replica_of_its_master(
        |builder| {
            let url = url.clone();
            async move { builder.connect(&url).await }
        },
        replica.process(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_with_a_replica_per_master() {
    let (cluster, replica) = tokio::task::spawn_blocking(|| {
        let cluster = RedisReplicatedCluster::start();
        // The namespace's keys share the hash tag `{namespace}`.
        let slot = cluster.key_slot(&format!("{{{NAMESPACE}}}"));
        let master = cluster.master_of_slot(slot).expect("the nodes agree");
        let replica = cluster.replica_of(master).expect("a replica");
        (cluster, replica)
    })
    .await
    .unwrap();
    let urls = cluster.urls();
    a_write_waits_for_the_replica_of_its_master(
        |builder| {
            let urls = urls.clone();
            async move { builder.connect_cluster(&urls).await }
        },
        cluster.nodes()[replica].process(),
    )
    .await;
}
