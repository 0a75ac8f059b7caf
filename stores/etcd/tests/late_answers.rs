//! Answers that come after the store gave up on their requests, as from an
//! overloaded member: the store's connection to the member stays open.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::task::JoinSet;
use workerid_etcd::EtcdStore;
use workerid_lease::{Error, LeaseStore, Namespace};
use workerid_testkit::proxy::DelayingProxy;

/// More requests than HTTP/2 forgives by default (1024 answers to streams
/// it had already forgotten, then it closes the connection).
const GIVEN_UP: usize = 1500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_after_the_request_timeout_leave_the_connection_open() {
    let endpoint = &workerid_testkit::etcd::shared_endpoints()[0];
    let server: SocketAddr = endpoint
        .trim_start_matches("http://")
        .parse()
        .expect("a loopback address");
    let proxy = DelayingProxy::start(server);
    let store = EtcdStore::builder()
        .request_timeout(Duration::from_secs(1))
        .operation_timeout(Duration::from_secs(1))
        .connect([format!("http://{}", proxy.address())])
        .await
        .expect("connect through the proxy");
    let namespace = Namespace::new("late-answers").expect("a valid namespace");
    store.list(&namespace).await.expect("a first list");

    // Every answer now comes 3 s late: after the store gave up on it (1 s),
    // and after HTTP/2 stopped remembering the stream it reset.
    proxy.set_delay(Duration::from_secs(3));
    let mut calls = JoinSet::new();
    for _ in 0..GIVEN_UP {
        let store = store.clone();
        let namespace = namespace.clone();
        calls.spawn(async move { store.list(&namespace).await });
    }
    while let Some(outcome) = calls.join_next().await {
        let error = outcome
            .expect("the task ran")
            .expect_err("no answer in time");
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.set_delay(Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(1)).await;

    store
        .list(&namespace)
        .await
        .expect("a list after the late answers");
    assert_eq!(
        proxy.connections(),
        1,
        "the late answers closed the store's connection, and it opened another"
    );
}
