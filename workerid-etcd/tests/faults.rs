//! Fault tests on etcd servers of their own: a node crash, the loss of a
//! follower and then of the leader in the middle of a run, a leader that
//! moves, a frozen member, a leader cut off from its followers, the loss of
//! quorum, and clusters that cannot be reached at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use workerid_conformance::{scenarios, segments, Outcome, SegmentFactory, StoreFactory};
use workerid_core::{Allocator, Error, LeaseOptions, LeaseStore};
use workerid_etcd::EtcdStore;
use workerid_segment::{SegmentStore, Tag};
use workerid_testkit::etcd::{EtcdCluster, EtcdServer};

mod support;
use support::Endpoints;

fn options(ttl: Duration) -> LeaseOptions {
    LeaseOptions::new()
        .worker_bits(4)
        .ttl(ttl)
        .max_lease_time(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(10))
}

/// The cluster's endpoints with `first` first: the store starts on it.
fn endpoints_starting_with(cluster: &EtcdCluster, first: &str) -> Vec<String> {
    let mut endpoints = cluster.endpoints();
    endpoints.sort_by_key(|e| e != first);
    endpoints
}

/// A single node that the durability scenarios may kill -9 and start again.
struct Crashable(EtcdServer, Endpoints);

impl Crashable {
    fn start() -> Crashable {
        let server = EtcdServer::start();
        let endpoints = Endpoints(vec![server.endpoint()]);
        Crashable(server, endpoints)
    }
}

#[async_trait]
impl StoreFactory for Crashable {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.1.store().await)
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
impl SegmentFactory for Crashable {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.1.store().await)
    }
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        StoreFactory::restart(self).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_fences_watermarks_and_ranges_survive_a_crash() {
    let factory = Crashable::start();
    assert_eq!(scenarios::survives_restart(&factory).await, Outcome::Passed);
    assert_eq!(
        segments::ranges_survive_a_restart(&factory).await,
        Outcome::Passed
    );
}

/// Who holds which ID, as the holders believe: a grant of an ID whose
/// previous holder's local deadline has not passed is a double grant.
#[derive(Default)]
struct Holders {
    by_id: Mutex<HashMap<u32, (usize, Instant)>>,
    violations: Mutex<Vec<String>>,
}

impl Holders {
    fn granted(&self, worker: usize, id: u32, deadline: Instant) {
        let now = Instant::now();
        let mut by_id = self.by_id.lock().unwrap();
        if let Some((other, until)) = by_id.get(&id) {
            if *until > now && *other != worker {
                self.violations.lock().unwrap().push(format!(
                    "ID {id} granted to worker {worker} while worker {other} holds it for {:?} more",
                    *until - now
                ));
            }
        }
        by_id.insert(id, (worker, deadline));
    }

    fn renewed(&self, worker: usize, id: u32, deadline: Instant) {
        self.by_id.lock().unwrap().insert(id, (worker, deadline));
    }

    fn dropped(&self, worker: usize, id: u32) {
        let mut by_id = self.by_id.lock().unwrap();
        if by_id.get(&id).is_some_and(|(w, _)| *w == worker) {
            by_id.remove(&id);
        }
    }
}

/// What every worker saw: the instants of its successes and failures.
#[derive(Default)]
struct Log {
    ok: Mutex<Vec<Instant>>,
    failed: Mutex<Vec<(Instant, String)>>,
    lost: Mutex<Vec<String>>,
}

/// A worker: acquire, renew a few times, release; again and again.
async fn churn(
    worker: usize,
    allocator: Allocator,
    holders: Arc<Holders>,
    log: Arc<Log>,
    until: Instant,
) {
    while Instant::now() < until {
        let mut lease = match allocator.acquire().await {
            Ok(lease) => {
                holders.granted(worker, lease.id().get(), lease.deadline());
                log.ok.lock().unwrap().push(Instant::now());
                lease
            }
            Err(e) => {
                log.failed
                    .lock()
                    .unwrap()
                    .push((Instant::now(), e.to_string()));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            match allocator.renew(&mut lease).await {
                Ok(deadline) => {
                    holders.renewed(worker, lease.id().get(), deadline);
                    log.ok.lock().unwrap().push(Instant::now());
                }
                Err(e) if e.is_lease_lost() => {
                    log.lost
                        .lock()
                        .unwrap()
                        .push(format!("worker {worker}: {e}"));
                    holders.dropped(worker, lease.id().get());
                    break;
                }
                Err(e) => log
                    .failed
                    .lock()
                    .unwrap()
                    .push((Instant::now(), e.to_string())),
            }
        }
        holders.dropped(worker, lease.id().get());
        if let Err(e) = allocator.release(&lease).await {
            if e.is_lease_lost() {
                log.lost
                    .lock()
                    .unwrap()
                    .push(format!("worker {worker} release: {e}"));
            } else {
                log.failed
                    .lock()
                    .unwrap()
                    .push((Instant::now(), e.to_string()));
            }
        }
    }
}

/// The longest time between two successes in `[from, to]`.
fn longest_gap(ok: &[Instant], from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> = ok
        .iter()
        .copied()
        .filter(|t| *t >= from && *t <= to)
        .collect();
    times.sort();
    let mut edges = vec![from];
    edges.extend(times);
    edges.push(to);
    edges
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_keeps_granting_through_the_loss_of_a_follower_then_the_leader() {
    let cluster = EtcdCluster::start();
    let follower = cluster.follower().expect("a follower").endpoint();
    // The stores start on the member that will die first.
    let endpoints = endpoints_starting_with(&cluster, &follower);
    let holders = Arc::new(Holders::default());
    let log = Arc::new(Log::default());
    let started = Instant::now();
    let until = started + Duration::from_secs(13);
    let mut workers = Vec::new();
    let mut preferring = Vec::new();
    for worker in 0..6 {
        // A store each: half of them stay on the member that dies first,
        // half go to the leader (the default), which dies second.
        let prefer_leader = worker % 2 == 0;
        let store = EtcdStore::builder()
            .request_timeout(Duration::from_millis(500))
            .prefer_leader(prefer_leader)
            .connect(&endpoints)
            .await
            .unwrap();
        assert_eq!(
            on_the_leader(&store).await,
            prefer_leader,
            "worker {worker}: on the leader when it prefers it, else on the first endpoint"
        );
        if prefer_leader {
            preferring.push(store.clone());
        }
        // A ttl that a loaded 2-core machine does not outlast while the cluster
        // elects a new leader (with 3 s, renewals stalled by the load ran out).
        let allocator =
            Allocator::new(store, "failover", options(Duration::from_secs(10))).unwrap();
        workers.push(tokio::spawn(churn(
            worker,
            allocator,
            holders.clone(),
            log.clone(),
            until,
        )));
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed_follower = Instant::now();
    tokio::task::block_in_place(|| {
        let node = cluster
            .nodes()
            .iter()
            .find(|n| n.endpoint() == follower)
            .unwrap();
        node.process().kill();
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    tokio::task::block_in_place(|| {
        // Back with two of three, before the leader goes.
        let node = cluster
            .nodes()
            .iter()
            .find(|n| n.endpoint() == follower)
            .unwrap();
        node.process().start();
        cluster.wait_healthy(Duration::from_secs(30));
    });
    let back = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let killed_leader = Instant::now();
    tokio::task::block_in_place(|| {
        cluster.leader().expect("a leader").process().kill();
    });
    for worker in workers {
        worker.await.unwrap();
    }

    for store in preferring {
        assert!(
            on_the_leader(&store).await,
            "a store that prefers the leader found the new one"
        );
    }

    let violations = holders.violations.lock().unwrap();
    assert!(violations.is_empty(), "double grants: {violations:?}");
    let lost = log.lost.lock().unwrap();
    assert!(lost.is_empty(), "leases lost: {lost:?}");
    let ok = log.ok.lock().unwrap();
    let failed = log.failed.lock().unwrap();
    for (what, from, to) in [
        ("before the faults", started, killed_follower),
        ("after a follower died", killed_follower, back),
        ("after the leader died", killed_leader, until),
    ] {
        let gap = longest_gap(&ok, from, to);
        assert!(
            gap < Duration::from_secs(3),
            "{what}: no success for {gap:?}; failures: {:?}",
            failed
                .iter()
                .filter(|(t, _)| *t >= from && *t <= to)
                .collect::<Vec<_>>()
        );
    }
    // Once the cluster has settled, nothing fails: no request keeps going to
    // a dead member.
    let settled = killed_leader + Duration::from_secs(3);
    let late: Vec<_> = failed.iter().filter(|(t, _)| *t > settled).collect();
    assert!(
        late.is_empty(),
        "failures after the cluster settled: {late:?}"
    );
    let settled = killed_follower + Duration::from_secs(2);
    let late: Vec<_> = failed
        .iter()
        .filter(|(t, _)| *t > settled && *t < back)
        .collect();
    assert!(
        late.is_empty(),
        "failures while a follower was dead: {late:?}"
    );
}

/// Whether `store` sends its requests to the leader now.
async fn on_the_leader(store: &EtcdStore) -> bool {
    let status = store.client().await.unwrap().status().await.unwrap();
    status.header().unwrap().member_id() == status.leader()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_follows_the_leader_when_it_moves() {
    let cluster = EtcdCluster::start();
    let (leader, follower) = {
        let leader = cluster.leader().expect("a leader").endpoint();
        (
            leader.clone(),
            cluster.follower().expect("a follower").endpoint(),
        )
    };
    // The leader last: the store finds it all the same.
    let mut endpoints = endpoints_starting_with(&cluster, &follower);
    endpoints.sort_by_key(|e| *e == leader);
    let connect = |prefer: bool| {
        EtcdStore::builder()
            .prefer_leader(prefer)
            .leader_check_interval(Duration::from_millis(200))
            .connect(endpoints.clone())
    };
    let (following, staying) = (connect(true).await.unwrap(), connect(false).await.unwrap());
    assert!(on_the_leader(&following).await);
    assert!(
        !on_the_leader(&staying).await,
        "no preference: the first endpoint"
    );
    let before = following.client().await.unwrap().status().await.unwrap();

    // Hand the leadership to the member the other store is on.
    let mut staying_client = staying.client().await.unwrap();
    let target = staying_client
        .status()
        .await
        .unwrap()
        .header()
        .unwrap()
        .member_id();
    let mut leader_client = following.client().await.unwrap();
    leader_client.move_leader(target).await.unwrap();
    tokio::task::block_in_place(|| cluster.wait_healthy(Duration::from_secs(30)));

    // Nothing failed: the periodic check alone finds the new leader, while
    // the store keeps working.
    let allocator =
        Allocator::new(following.clone(), "moved", options(Duration::from_secs(5))).unwrap();
    let mut lease = allocator.acquire().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !on_the_leader(&following).await {
        assert!(
            Instant::now() < deadline,
            "the store never followed the leader"
        );
        allocator.renew(&mut lease).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = following.client().await.unwrap().status().await.unwrap();
    assert_ne!(
        before.header().unwrap().member_id(),
        after.header().unwrap().member_id(),
        "the store moved to another member"
    );
    assert!(
        on_the_leader(&staying).await,
        "the leader came to the other store's member"
    );
    allocator.release(&lease).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_member_is_passed_over_within_the_request_timeout() {
    let cluster = EtcdCluster::start();
    let victim = cluster.follower().expect("a follower");
    let endpoints = endpoints_starting_with(&cluster, &victim.endpoint());
    let store = EtcdStore::builder()
        .request_timeout(Duration::from_millis(300))
        // On the member that freezes, not on the leader.
        .prefer_leader(false)
        .connect(&endpoints)
        .await
        .unwrap();
    let allocator = Allocator::new(store, "frozen", options(Duration::from_secs(5))).unwrap();
    let mut lease = allocator.acquire().await.unwrap();

    victim.process().pause();
    let started = Instant::now();
    let renewed = allocator.renew(&mut lease).await;
    let waited = started.elapsed();
    let next = allocator.acquire().await;
    victim.process().resume();
    renewed.expect("a renew passes a frozen member by");
    next.expect("and so does the next acquire");
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");
}

/// A store on `cluster` that gives up on a member within 500 ms and on an
/// operation within 2 s.
async fn impatient_store(cluster: &EtcdCluster) -> EtcdStore {
    EtcdStore::builder()
        .request_timeout(Duration::from_millis(500))
        .operation_timeout(Duration::from_secs(2))
        .connect(cluster.endpoints())
        .await
        .unwrap()
}

/// A leader whose followers are frozen still answers keep-alives from its
/// own memory (etcd 3.4 and 3.5 do, at once), so on a cluster of more than
/// one member a renewal must not be a keep-alive alone: its linearizable
/// read needs a quorum, and the renewal fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_followers_renews_nothing() {
    let cluster = EtcdCluster::start();
    let store = impatient_store(&cluster).await;
    let allocator = Allocator::new(store, "cut-off", options(Duration::from_secs(20))).unwrap();
    let mut lease = allocator.acquire().await.unwrap();
    allocator.renew(&mut lease).await.unwrap();

    let followers: Vec<_> = tokio::task::block_in_place(|| {
        let leader = cluster.leader().expect("a leader").name().to_string();
        let followers: Vec<_> = cluster
            .nodes()
            .iter()
            .filter(|n| n.name() != leader)
            .collect();
        for node in &followers {
            node.process().pause();
        }
        followers
    });
    let renew = allocator.renew(&mut lease).await;
    for node in &followers {
        node.process().resume();
    }
    assert!(
        matches!(renew, Err(Error::Unavailable { .. })),
        "renew on a leader cut off from its followers: {renew:?}"
    );
    tokio::task::block_in_place(|| cluster.wait_healthy(Duration::from_secs(30)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_quorum_every_operation_is_unavailable_then_recovers() {
    let cluster = EtcdCluster::start();
    let store = impatient_store(&cluster).await;
    let tag = Tag::new("quorum").unwrap();
    assert!(store.create_tag(&tag, 1, 100).await.unwrap());
    assert_eq!(store.reserve(&tag, None).await.unwrap().first, 1);
    let allocator =
        Allocator::new(store.clone(), "quorum", options(Duration::from_secs(20))).unwrap();
    let mut lease = allocator.acquire().await.unwrap();

    let survivor = tokio::task::block_in_place(|| {
        let leader = cluster.leader().expect("a leader").name().to_string();
        let follower = cluster.follower().expect("a follower").name().to_string();
        for node in cluster.nodes() {
            if node.name() == leader || node.name() == follower {
                node.process().kill();
            }
        }
        cluster
            .nodes()
            .iter()
            .find(|n| n.process().is_running())
            .unwrap()
    });
    assert!(!survivor.healthy());

    let started = Instant::now();
    let acquire = allocator.acquire().await;
    assert!(
        matches!(acquire, Err(Error::Unavailable { .. })),
        "acquire: {acquire:?}"
    );
    let renew = allocator.renew(&mut lease).await;
    assert!(
        matches!(renew, Err(Error::Unavailable { .. })),
        "renew: {renew:?}"
    );
    let reserve = store.reserve(&tag, None).await;
    assert!(
        matches!(reserve, Err(workerid_segment::Error::Unavailable { .. })),
        "reserve: {reserve:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "three operations took {:?} with an operation timeout of 2 s",
        started.elapsed()
    );

    tokio::task::block_in_place(|| {
        for node in cluster.nodes() {
            node.process().start();
        }
        cluster.wait_healthy(Duration::from_secs(30));
    });
    allocator
        .renew(&mut lease)
        .await
        .expect("the lease outlived the outage (etcd does not expire leases without a leader)");
    let range = store.reserve(&tag, None).await.unwrap();
    assert_eq!(range.first, 101, "the failed reservation took nothing");
    allocator.release(&lease).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_unreachable_clusters_are_typed_errors() {
    for bad in [
        vec![],
        vec!["not an endpoint"],
        vec!["http://127.0.0.1:99999"],
    ] {
        let answer = EtcdStore::connect(bad.clone()).await;
        assert!(
            matches!(answer, Err(Error::InvalidConfig { .. })),
            "{bad:?}: {answer:?}"
        );
    }
    let prefix = EtcdStore::builder()
        .key_prefix("a//b")
        .connect(["http://127.0.0.1:1"])
        .await;
    assert!(
        matches!(prefix, Err(Error::InvalidConfig { .. })),
        "{prefix:?}"
    );
    for endless in [
        EtcdStore::builder().operation_timeout(Duration::MAX),
        EtcdStore::builder().connect_timeout(Duration::MAX),
    ] {
        let answer = endless.connect(["http://127.0.0.1:1"]).await;
        assert!(
            matches!(answer, Err(Error::InvalidConfig { .. })),
            "{answer:?}"
        );
    }

    let closed = [workerid_testkit::free_port(), workerid_testkit::free_port()]
        .map(|p| format!("http://127.0.0.1:{p}"));
    let started = Instant::now();
    let answer = EtcdStore::builder()
        .operation_timeout(Duration::from_secs(1))
        .connect(&closed)
        .await;
    assert!(
        matches!(answer, Err(Error::Unavailable { .. })),
        "{answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );

    let node = Endpoints(workerid_testkit::etcd::shared_endpoints());
    let store = node.store().await;
    for ttl in [Duration::from_secs(1), Duration::from_millis(2500)] {
        let refused = Allocator::new(store.clone(), "ttl", options(ttl));
        assert!(
            matches!(refused, Err(Error::InvalidConfig { .. })),
            "ttl {ttl:?}: {refused:?}"
        );
    }
}
