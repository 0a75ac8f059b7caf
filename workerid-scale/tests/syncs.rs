//! Disk syncs are read from every store that counts them, and rise with
//! durable writes; stores without a count say so instead of reading zero.

use std::time::Duration;

use workerid::{Holder, LeaseStore, Namespace, Token};
use workerid_scale::{Connect, StoreKind, Target};

async fn writes_are_synced(kind: StoreKind) {
    let target = Target::start(kind, Connect::default())
        .await
        .expect("store");
    let before = target.disk_syncs().await.expect("a count");
    let namespace = Namespace::new("syncs").expect("namespace");
    for _ in 0..5 {
        target
            .store
            .acquire(
                &namespace,
                63,
                &Token::generate(),
                Duration::from_secs(30),
                &Holder::default(),
            )
            .await
            .expect("acquire");
    }
    // PostgreSQL publishes a backend's WAL counts when it goes idle, at
    // most once a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let after = target.disk_syncs().await.expect("a count");
        if after >= before + 5 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{kind:?}: {before} syncs before five durable acquires, {after} after"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_counts_its_syncs() {
    writes_are_synced(StoreKind::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_counts_its_syncs() {
    writes_are_synced(StoreKind::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_counts_its_syncs() {
    writes_are_synced(StoreKind::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_and_sqlite_have_no_count() {
    for kind in [StoreKind::Redis, StoreKind::Sqlite] {
        let target = Target::start(kind, Connect::default())
            .await
            .expect("store");
        assert_eq!(target.disk_syncs().await, None, "{kind:?}");
    }
}
