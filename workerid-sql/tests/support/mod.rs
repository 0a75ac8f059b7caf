//! The factory every SQL test binary uses: a new pool per handle on one database.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_core::LeaseStore;
use workerid_segment::SegmentStore;
use workerid_sql::SqlStore;

/// Handles on the database at `url`, each with a pool of its own.
pub struct Database {
    pub url: String,
}

impl Database {
    async fn open(&self) -> SqlStore {
        SqlStore::builder()
            .max_connections(12)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url))
    }
}

#[async_trait]
impl SegmentFactory for Database {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.open().await)
    }

    /// go-id-alloc's and Leaf's reservation, as they send it.
    async fn reserve_without_version(&self, tag: &workerid_segment::Tag, step: u64) -> bool {
        let store = self.open().await;
        let statement = format!(
            "UPDATE {} SET max_id = max_id + {step} WHERE biz_tag = '{}'",
            workerid_sql::DEFAULT_SEGMENTS_TABLE,
            tag.as_str()
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(store.pool())
            .await
            .expect("a reservation of go-id-alloc's and Leaf's");
        assert_eq!(done.rows_affected(), 1, "the tag's row");
        true
    }
}

#[async_trait]
impl StoreFactory for Database {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.open().await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn LeaseStore>> {
        if self.url.starts_with("sqlite:") {
            return None; // a file: no server to lose
        }
        let (relay, url) = workerid_testkit::relay::Relay::in_front_of(&self.url);
        // A short wait for a pool connection: each call ends in half a second.
        let store = SqlStore::builder()
            .max_connections(2)
            .acquire_timeout(std::time::Duration::from_millis(500))
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("connect through a relay: {e}"));
        relay.stop();
        Some(Arc::new(store))
    }

    fn share_with_children(&self) -> Option<Vec<(String, String)>> {
        let env = if self.url.starts_with("sqlite:") {
            SQLITE_URL_ENV
        } else if self.url.starts_with("postgres") {
            workerid_testkit::postgres::URL_ENV
        } else {
            workerid_testkit::mariadb::URL_ENV
        };
        Some(vec![(env.to_string(), self.url.clone())])
    }
}

/// The SQLite URL a test binary uses instead of a file of its own when set:
/// how a child process finds its parent's database.
#[allow(dead_code)] // not every test binary that shares this module uses SQLite
pub const SQLITE_URL_ENV: &str = "WORKERID_SQLITE_URL";

/// 64 clients, each with its own lease in one namespace, renew as fast as
/// they can for a second: every renewal must succeed (MySQL's REPEATABLE READ
/// deadlocked here).
#[allow(dead_code)] // not every test binary that shares this module runs it
pub async fn renewal_storm(url: &str) {
    use std::time::{Duration, Instant};
    use workerid_core::{Allocator, LeaseOptions};
    let store: Arc<dyn LeaseStore> = Arc::new(
        Database {
            url: url.to_string(),
        }
        .open()
        .await,
    );
    let namespace = format!("storm.{}", std::process::id());
    let until = Instant::now() + Duration::from_secs(1);
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let options = LeaseOptions::new()
                .worker_bits(7)
                .max_lease_time(Duration::from_secs(60));
            let allocator = Allocator::from_arc(store.clone(), &namespace, options).unwrap();
            tokio::spawn(async move {
                let mut lease = allocator.acquire().await.expect("acquire");
                let mut renewed = 0;
                while Instant::now() < until {
                    allocator
                        .renew(&mut lease)
                        .await
                        .expect("a renewal under load");
                    renewed += 1;
                }
                allocator.release(&lease).await.expect("release");
                renewed
            })
        })
        .collect();
    let mut total = 0;
    for client in clients {
        total += client.await.expect("a client failed");
    }
    assert!(total >= 64, "{total} renewals");
}

/// The contention scenario on the database at `url`, five times: acquirers
/// racing for IDs never granted, then for the same IDs released, where a
/// deadlock between two acquires shows.
#[allow(dead_code)] // not every test binary that shares this module runs it
pub async fn race_for_released_ids(url: &str) {
    for _ in 0..5 {
        workerid_conformance::scenarios::contention_gives_distinct_grants(&Database {
            url: url.to_string(),
        })
        .await;
    }
}

/// The segment table refuses a row with a step of 0 or a negative max
/// (its CHECKs), and a reservation from a table made without those CHECKs
/// (and without the version column, which connecting adds) that holds a
/// step of 0 is refused as unavailable rather than handing out a bad range.
#[allow(dead_code)] // not every test binary that shares this module runs it
pub async fn bad_segment_rows_are_refused(url: &str) {
    use sqlx::AssertSqlSafe;

    use workerid_segment::{Error, Tag};

    let suffix: u32 = rand::random();
    let checked = format!("segments_checked_{suffix:08x}");
    let store = SqlStore::builder()
        .segments_table(checked.clone())
        .connect(url)
        .await
        .expect("connect");
    let insert = |table: &str, tag: &str, max: i64, step: i64| {
        format!(
            "INSERT INTO {table} (biz_tag, max_id, step, description) \
             VALUES ('{tag}', {max}, {step}, '')"
        )
    };
    for (tag, max, step) in [
        ("zero-step", 0, 0),
        ("negative-step", 0, -5),
        ("negative-max", -1, 10),
    ] {
        let written = sqlx::query(AssertSqlSafe(insert(&checked, tag, max, step)))
            .execute(store.pool())
            .await;
        assert!(
            written.is_err(),
            "the database wrote a row with max_id {max} and step {step}"
        );
    }
    sqlx::query(AssertSqlSafe(insert(&checked, "fine", 0, 10)))
        .execute(store.pool())
        .await
        .expect("a good row is written");

    let unchecked = format!("segments_unchecked_{suffix:08x}");
    create_plain_segment_table(&store, &unchecked).await;
    sqlx::query(AssertSqlSafe(insert(&unchecked, "zero-step", 0, 0)))
        .execute(store.pool())
        .await
        .expect("the unchecked table takes a step of 0");
    let old = SqlStore::builder()
        .segments_table(unchecked)
        .connect(url)
        .await
        .expect("connect to go-id-alloc's layout (the version column is added)");
    let tag = Tag::new("zero-step").expect("tag");
    let answer = old.reserve(&tag, None).await;
    assert!(
        matches!(&answer, Err(Error::Unavailable { source, .. }) if source.to_string().contains("step is 0")),
        "a step of 0 must not make a range: {answer:?}"
    );
}

/// Segment stores on `table` kept exactly as it is (no version column).
struct Unversioned {
    url: String,
    table: String,
}

#[async_trait]
impl SegmentFactory for Unversioned {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        let store = SqlStore::builder()
            .segments_table(self.table.clone())
            .segment_versions(false)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url));
        Arc::new(store)
    }
}

/// A segment table of go-id-alloc's layout, with `segment_versions(false)`:
/// the table is left exactly as it is (no column added), every segment
/// scenario passes on it with give-backs refused, and a store with
/// versions (the default) adds the column afterwards.
#[allow(dead_code)] // not every test binary that shares this module runs it
pub async fn a_segment_table_kept_as_it_is(url: &str) {
    use sqlx::AssertSqlSafe;

    let suffix: u32 = rand::random();
    let table = format!("segments_plain_{suffix:08x}");
    let plain = SqlStore::builder().connect(url).await.expect("connect");
    create_plain_segment_table(&plain, &table).await;
    let has_version = |store: &SqlStore| {
        let probe = format!("SELECT version FROM {table} WHERE 1 = 0");
        let pool = store.pool().clone();
        async move {
            sqlx::query(AssertSqlSafe(probe))
                .execute(&pool)
                .await
                .is_ok()
        }
    };
    let factory = Unversioned {
        url: url.to_string(),
        table: table.clone(),
    };
    let store = factory.connect().await;
    assert!(!store.segment_capabilities().give_back);
    let outcome = workerid_conformance::run_all_segments(&factory).await;
    assert_eq!(outcome.failed(), Vec::<&str>::new(), "{outcome:?}");
    assert!(!has_version(&plain).await, "the table was changed");
    let versioned = SqlStore::builder()
        .segments_table(table.clone())
        .connect(url)
        .await
        .expect("connect with versions");
    assert!(
        has_version(&versioned).await,
        "the version column was not added"
    );
    assert!(versioned.segment_capabilities().give_back);
}

/// Creates `table` with go-id-alloc's columns and nothing more: no CHECKs,
/// no version column.
async fn create_plain_segment_table(store: &SqlStore, table: &str) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {table} (biz_tag VARCHAR(32) NOT NULL PRIMARY KEY, \
         max_id BIGINT NOT NULL, step BIGINT NOT NULL, \
         description VARCHAR(1024) NOT NULL DEFAULT '', \
         update_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP)"
    )))
    .execute(store.pool())
    .await
    .expect("a table of go-id-alloc's layout");
}

/// The `ALTER TABLE` that adds the version column gives up within its lock
/// wait when a transaction holds the table, naming the statement to run
/// later and leaving the table as it was; once the table is free, the next
/// connect adds the column.
#[allow(dead_code)] // not every test binary that shares this module runs it
pub async fn an_alter_behind_a_held_table_gives_up_in_time(url: &str) {
    use sqlx::{AssertSqlSafe, Connection};

    let suffix: u32 = rand::random();
    let table = format!("segments_held_{suffix:08x}");
    let plain = SqlStore::builder().connect(url).await.expect("connect");
    create_plain_segment_table(&plain, &table).await;
    // Another server's transaction that read the table and stays open.
    let mut holder = sqlx::AnyConnection::connect(url)
        .await
        .expect("a connection");
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    sqlx::query(AssertSqlSafe(format!("SELECT max_id FROM {table}")))
        .fetch_all(&mut holder)
        .await
        .expect("read the table");

    let started = std::time::Instant::now();
    let refused = SqlStore::builder()
        .segments_table(table.clone())
        .connect(url)
        .await
        .map(|_| ())
        .expect_err("the ALTER cannot take the lock");
    let waited = started.elapsed();
    let said = refused.to_string();
    assert!(
        said.contains("segment_versions=false") && said.contains("ADD COLUMN version"),
        "{said}"
    );
    assert!(waited < Duration::from_secs(30), "waited {waited:?}");
    let probe = format!("SELECT version FROM {table} WHERE 1 = 0");
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("rollback");
    assert!(
        sqlx::query(AssertSqlSafe(probe.clone()))
            .execute(plain.pool())
            .await
            .is_err(),
        "the column was added after all"
    );
    SqlStore::builder()
        .segments_table(table)
        .connect(url)
        .await
        .expect("the table is free: the column is added");
    sqlx::query(AssertSqlSafe(probe))
        .execute(plain.pool())
        .await
        .expect("the version column");
}
