//! Fault tests on databases of their own: crashes (kill -9) and restarts keep
//! every live lease, fence and watermark; an outage is `Unavailable`, never a
//! false success, and the store recovers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use workerid_conformance::{scenarios, segments, Outcome, SegmentFactory, StoreFactory};
use workerid_core::{Allocator, Error, LeaseOptions, LeaseStore};
use workerid_segment::SegmentStore;
use workerid_sql::SqlStore;
use workerid_testkit::mariadb::MariaDbServer;
use workerid_testkit::postgres::PostgresServer;
use workerid_testkit::ServerProcess;

async fn connect(url: &str) -> SqlStore {
    SqlStore::builder()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(2))
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// A database server of its own, crashed and started again on `restart`.
struct Crashable<'a> {
    url: String,
    process: &'a ServerProcess,
}

#[async_trait]
impl StoreFactory for Crashable<'_> {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(connect(&self.url).await)
    }
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        tokio::task::block_in_place(|| {
            self.process.kill();
            self.process.start();
        });
    }
}

#[async_trait]
impl SegmentFactory for Crashable<'_> {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(connect(&self.url).await)
    }
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        StoreFactory::restart(self).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_leases_fences_and_watermarks_across_a_crash() {
    let server = PostgresServer::start();
    let factory = Crashable {
        url: server.url(),
        process: server.process(),
    };
    assert_eq!(scenarios::survives_restart(&factory).await, Outcome::Passed);
    assert_eq!(
        segments::ranges_survive_a_restart(&factory).await,
        Outcome::Passed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_keeps_leases_fences_and_watermarks_across_a_crash() {
    let server = MariaDbServer::start();
    let factory = Crashable {
        url: server.url(),
        process: server.process(),
    };
    assert_eq!(scenarios::survives_restart(&factory).await, Outcome::Passed);
    assert_eq!(
        segments::ranges_survive_a_restart(&factory).await,
        Outcome::Passed
    );
}

/// SQLite has no server: a restart closes every pool on the file, and the
/// next handles open it again.
struct ReopenedFile {
    url: String,
    opened: Mutex<Vec<SqlStore>>,
}

#[async_trait]
impl StoreFactory for ReopenedFile {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        let store = connect(&self.url).await;
        self.opened.lock().unwrap().push(store.clone());
        Arc::new(store)
    }
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        let opened = std::mem::take(&mut *self.opened.lock().unwrap());
        for store in opened {
            store.pool().close().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_leases_fences_and_watermarks_when_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let factory = ReopenedFile {
        url: workerid_testkit::sqlite_url(&dir.path().join("leases.db")),
        opened: Mutex::new(Vec::new()),
    };
    assert_eq!(scenarios::survives_restart(&factory).await, Outcome::Passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_unavailable_and_the_lease_outlives_it() {
    let server = PostgresServer::start();
    let options = LeaseOptions::new()
        .worker_bits(4)
        .max_lease_time(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(3));
    let allocator = Allocator::new(connect(&server.url()).await, "outage", options).unwrap();
    let mut lease = allocator.acquire().await.unwrap();

    server.process().kill();
    for _ in 0..2 {
        let started = Instant::now();
        let renew = allocator.renew(&mut lease).await;
        assert!(
            matches!(renew, Err(Error::Unavailable { .. })),
            "renew during an outage: {renew:?}"
        );
        let acquire = allocator.acquire().await;
        assert!(
            matches!(acquire, Err(Error::Unavailable { .. })),
            "acquire during an outage: {acquire:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "an outage must fail in bounded time"
        );
    }

    server.process().start();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match allocator.renew(&mut lease).await {
            Ok(_) => break,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(e) => panic!("the lease must be live after the outage: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_and_table_names_are_invalid_config() {
    for url in ["nope://somewhere", "not a url"] {
        let answer = SqlStore::connect(url).await;
        assert!(
            matches!(answer, Err(Error::InvalidConfig { .. })),
            "{url}: {answer:?}"
        );
    }
    for table in ["leases; DROP TABLE users", "1leases", "lea\"ses", ""] {
        let answer = SqlStore::builder()
            .table(table)
            .connect("sqlite::memory:")
            .await;
        assert!(
            matches!(answer, Err(Error::InvalidConfig { .. })),
            "{table:?}: {answer:?}"
        );
    }
    let memory = SqlStore::connect("sqlite::memory:").await.unwrap();
    assert!(
        !memory.capabilities().durable,
        "an in-memory database keeps nothing"
    );
    // One connection holds the whole in-memory database: concurrent callers share it.
    let options = LeaseOptions::new().worker_bits(3);
    let allocator = Allocator::new(memory, "memory", options).unwrap();
    assert_eq!(
        granted_at_once(&allocator, 9).await,
        8,
        "all eight IDs of the in-memory pool, and no more"
    );
}

/// Runs `n` acquires at once; returns how many were granted.
async fn granted_at_once(allocator: &Allocator, n: usize) -> usize {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let a = allocator.clone();
            tokio::spawn(async move { a.acquire().await })
        })
        .collect();
    let mut granted = 0;
    for task in tasks {
        granted += usize::from(task.await.unwrap().is_ok());
    }
    granted
}
