//! Answers that come after the store gave up on their requests, as from an
//! overloaded member: the store's connection to the member stays open. And
//! an answer that never comes: a force release cut off after its first write.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use etcd_client::{WatchOptions, WatchStream, Watcher};
use tokio::task::JoinSet;
use workerid_core::{Error, Holder, LeaseStore, Namespace, Token};
use workerid_etcd::EtcdStore;
use workerid_testkit::proxy::DelayingProxy;

/// A store on the shared node, through a proxy of its own, that gives up
/// on an operation after 1 s.
async fn through_proxy() -> (DelayingProxy, EtcdStore) {
    let proxy = DelayingProxy::start(shared_address());
    let store = EtcdStore::builder()
        .request_timeout(Duration::from_secs(1))
        .operation_timeout(Duration::from_secs(1))
        .connect([format!("http://{}", proxy.address())])
        .await
        .expect("connect through the proxy");
    store.list(&namespace()).await.expect("a first list");
    (proxy, store)
}

/// The shared node's client address.
fn shared_address() -> SocketAddr {
    let endpoint = &workerid_testkit::etcd::shared_endpoints()[0];
    endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .unwrap_or_else(|| panic!("the address of {endpoint}"))
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

/// A watch of the keys under a prefix, through a raw client of a store.
struct Writes {
    _watcher: Watcher,
    events: WatchStream,
}

impl Writes {
    /// Watches the keys under `prefix` from now on.
    async fn under(store: &EtcdStore, prefix: String) -> Writes {
        let mut client = store.client().await.expect("a raw client");
        let (_watcher, events) = client
            .watch(prefix, Some(WatchOptions::new().with_prefix()))
            .await
            .expect("watch the prefix");
        Writes { _watcher, events }
    }

    /// Whether a write under the prefix came within 5 s.
    async fn came(&mut self) -> bool {
        let events = &mut self.events;
        tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(answer) = events.message().await.expect("watch answers") {
                if !answer.events().is_empty() {
                    return;
                }
            }
        })
        .await
        .is_ok()
    }
}

/// A store on the shared node under `cut-off/`, directly or through `proxy`.
async fn cut_off_store(through: Option<&DelayingProxy>) -> EtcdStore {
    let endpoint = match through {
        Some(proxy) => format!("http://{}", proxy.address()),
        None => workerid_testkit::etcd::shared_endpoints()[0].clone(),
    };
    EtcdStore::builder()
        .key_prefix("cut-off")
        .request_timeout(Duration::from_secs(1))
        .operation_timeout(Duration::from_secs(2))
        .connect([endpoint])
        .await
        .expect("connect")
}

/// An operator's force release whose connection is lost right after its
/// first write reached etcd fails, and leaves the worker ID whole: its
/// holder, renewing by keep-alive alone on this one-member cluster, keeps
/// it and nobody else gets it. Calling it again frees the ID: the holder's
/// renewal then fails and another acquirer gets the ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_cut_off_midway_never_leaves_two_holders() {
    let ns = Namespace::new("forced-midway").expect("a valid namespace");
    let ttl = Duration::from_secs(10);
    let label = Holder::new("cut-off-test").expect("a valid holder");
    let (holder, other) = (cut_off_store(None).await, cut_off_store(None).await);
    let token = Token::generate();
    let grant = holder
        .acquire(&ns, 0, &token, ttl, &label)
        .await
        .expect("acquire in a pool of one");
    let id = grant.id;

    // Answers through the proxy come 500 ms late, so the test sees the force
    // release's first write land in etcd before the operator's store does,
    // and cuts its connection then.
    let mut writes = Writes::under(&holder, format!("cut-off/ns/{ns}/")).await;
    let proxy = DelayingProxy::start(shared_address());
    let operator = cut_off_store(Some(&proxy)).await;
    proxy.set_delay(Duration::from_millis(500));
    let forcing = {
        let ns = ns.clone();
        tokio::spawn(async move { operator.force_release(&ns, id).await })
    };
    let written = writes.came().await;
    drop(proxy);
    assert!(written, "the force release wrote within 5 s");
    let outcome = forcing.await.expect("the task ran");
    assert!(
        matches!(outcome, Err(Error::Unavailable { .. })),
        "cut off midway: {outcome:?}"
    );

    let renewed = holder.renew(&ns, id, &token, ttl, 0).await;
    let taken = other.acquire(&ns, 0, &Token::generate(), ttl, &label).await;
    assert!(
        !(renewed.is_ok() && taken.is_ok()),
        "two holders of {id}: the old one renews ({renewed:?}) and a new one got it ({taken:?})"
    );
    renewed.expect("the holder keeps an ID whose force release failed");
    assert!(
        matches!(taken, Err(Error::NoAvailableId { .. })),
        "{taken:?}"
    );

    assert!(
        other
            .force_release(&ns, id)
            .await
            .expect("force release again"),
        "the second call frees the live ID"
    );
    assert!(
        matches!(
            holder.renew(&ns, id, &token, ttl, 0).await,
            Err(Error::NotAssigned { .. })
        ),
        "the former holder is refused"
    );
    other
        .acquire(&ns, 0, &Token::generate(), ttl, &label)
        .await
        .expect("the forced ID is free at once");
}

/// A release whose answer comes after the store gave up on it, and whose ID
/// another token was granted before the store sent it again (the test
/// checks that order): the second
/// sending finds the ID held by that token, and the release succeeds all
/// the same, since its first sending freed the ID. The new holder keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_answered_late_succeeds_though_the_id_was_granted_again() {
    let ns = Namespace::new("released-late").expect("a valid namespace");
    let ttl = Duration::from_secs(10);
    let label = Holder::new("late-release-test").expect("a valid holder");
    let proxy = DelayingProxy::start(shared_address());
    // The store sends the release again after 2 s; time for that second
    // sending, whose answer waits behind the first's.
    let resent_after = Duration::from_secs(2);
    let holder = EtcdStore::builder()
        .key_prefix("cut-off")
        .request_timeout(resent_after)
        .operation_timeout(Duration::from_secs(8))
        .connect([format!("http://{}", proxy.address())])
        .await
        .expect("connect through the proxy");
    let other = cut_off_store(None).await;
    let token = Token::generate();
    let id = holder
        .acquire(&ns, 0, &token, ttl, &label)
        .await
        .expect("acquire in a pool of one")
        .id;

    let mut writes = Writes::under(&other, format!("cut-off/ns/{ns}/owner/")).await;
    // The release reaches etcd at once; its answer comes after the store's
    // request timeout, so the store sends it again.
    proxy.set_delay(Duration::from_secs(3));
    let sent = std::time::Instant::now();
    let releasing = {
        let ns = ns.clone();
        tokio::spawn(async move { holder.release(&ns, id, &token, 0).await })
    };
    assert!(writes.came().await, "the release freed the ID within 5 s");
    let newcomer = Token::generate();
    let regranted = other
        .acquire(&ns, 0, &newcomer, ttl, &label)
        .await
        .expect("the freed ID is granted again");
    assert_eq!(regranted.id, id);
    proxy.set_delay(Duration::ZERO);
    // Otherwise the second sending found the ID free, not granted again.
    assert!(
        sent.elapsed() < resent_after,
        "granted again {:?} after the release was sent, not before it was sent again",
        sent.elapsed()
    );

    let outcome = releasing.await.expect("the task ran");
    assert!(
        outcome.is_ok(),
        "the release, sent again after the ID was granted again: {outcome:?}"
    );
    other
        .renew(&ns, id, &newcomer, ttl, 0)
        .await
        .expect("the new holder keeps the ID");
    other
        .release(&ns, id, &newcomer, 0)
        .await
        .expect("the new holder releases it");
}
