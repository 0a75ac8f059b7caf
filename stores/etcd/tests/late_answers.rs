//! Answers that come after the store gave up on their requests, as from an
//! overloaded member: the store's connection to the member stays open.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use tokio::task::JoinSet;
use workerid_etcd::EtcdStore;
use workerid_lease::{Error, LeaseStore, Namespace};
use workerid_testkit::proxy::DelayingProxy;

/// A store on the shared node, through a proxy of its own, that gives up
/// on an operation after 1 s.
async fn through_proxy() -> (DelayingProxy, EtcdStore) {
    let endpoint = &workerid_testkit::etcd::shared_endpoints()[0];
    let server: SocketAddr = endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .unwrap_or_else(|| panic!("the address of {endpoint}"));
    let proxy = DelayingProxy::start(server);
    let store = EtcdStore::builder()
        .request_timeout(Duration::from_secs(1))
        .operation_timeout(Duration::from_secs(1))
        .connect([format!("http://{}", proxy.address())])
        .await
        .expect("connect through the proxy");
    store.list(&namespace()).await.expect("a first list");
    (proxy, store)
}

fn namespace() -> Namespace {
    Namespace::new("late-answers").expect("a valid namespace")
}

/// Lists `count` times at once, each left unanswered in time.
async fn lists_given_up(store: &EtcdStore, count: usize) {
    let mut calls = JoinSet::new();
    for _ in 0..count {
        let store = store.clone();
        calls.spawn(async move { store.list(&namespace()).await });
    }
    while let Some(outcome) = calls.join_next().await {
        let error = outcome
            .expect("the task ran")
            .expect_err("no answer in time");
        assert!(matches!(error, Error::Unavailable { .. }), "{error}");
    }
}

/// Lists once the answers come at once again, and checks the store still
/// uses the connection it opened first.
async fn the_first_connection_is_kept(proxy: &DelayingProxy, store: &EtcdStore) {
    proxy.set_delay(Duration::ZERO);
    tokio::time::sleep(Duration::from_secs(1)).await;
    store
        .list(&namespace())
        .await
        .expect("a list after the late answers");
    assert_eq!(
        proxy.connections(),
        1,
        "the late answers closed the store's connection, and it opened another"
    );
}

/// HTTP/2 by default closes a connection once 1024 answers came for
/// streams it reset and forgot (500 leave it open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_long_after_the_request_timeout_leave_the_connection_open() {
    let (proxy, store) = through_proxy().await;
    // Every answer now comes 3 s late: after the store gave up on it (1 s),
    // and after HTTP/2 stopped remembering the stream it reset.
    proxy.set_delay(Duration::from_secs(3));
    lists_given_up(&store, 1500).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    the_first_connection_is_kept(&proxy, &store).await;
}
