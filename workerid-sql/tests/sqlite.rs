//! The conformance suite on SQLite: one database file in WAL mode for this
//! test binary, each handle a pool of its own on it.

use std::sync::OnceLock;

mod support;

fn url() -> String {
    if let Ok(url) = std::env::var(support::SQLITE_URL_ENV) {
        return url;
    }
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| workerid_testkit::binary_temp_dir("workerid-sql-sqlite-"));
    workerid_testkit::sqlite_url(&dir.join("leases.db"))
}

workerid_conformance::lease_store_tests!(support::Database { url: url() });

workerid_conformance::segment_store_tests!(support::Database { url: url() });

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_segment_rows_are_refused() {
    support::bad_segment_rows_are_refused(&url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_table_kept_as_it_is() {
    support::a_segment_table_kept_as_it_is(&url()).await;
}

/// A transaction that SQLite rolls back by itself (as after a full disk or
/// an I/O error; here a trigger's `RAISE(ROLLBACK)`) fails that acquire
/// alone: the store's one connection is replaced, and the renewals after it,
/// which commit together, still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_sqlite_rolled_back_leaves_the_store_working() {
    use sqlx::AssertSqlSafe;
    use std::sync::Arc;
    use workerid_core::{Allocator, LeaseOptions};
    use workerid_sql::SqlStore;

    let dir = tempfile::tempdir().unwrap();
    let url = workerid_testkit::sqlite_url(&dir.path().join("rolled-back.db"));
    let store = SqlStore::connect(&url).await.unwrap();
    let sql = |text: &str| sqlx::query(AssertSqlSafe(text.to_string()));
    let allocator = Arc::new(
        Allocator::new(
            store.clone(),
            "rolled-back",
            LeaseOptions::new().worker_bits(6),
        )
        .unwrap(),
    );
    let mut leases = Vec::new();
    for _ in 0..16 {
        leases.push(allocator.acquire().await.unwrap());
    }
    sql(
        "CREATE TRIGGER boom BEFORE INSERT ON workerid_leases WHEN NEW.worker_id = 16 \
         BEGIN SELECT RAISE(ROLLBACK, 'boom'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let refused = allocator.acquire().await.unwrap_err();
    assert!(refused.to_string().contains("boom"), "{refused}");
    sql("DROP TRIGGER boom")
        .execute(store.pool())
        .await
        .unwrap();
    for _ in 0..3 {
        let renewals: Vec<_> = leases
            .drain(..)
            .map(|mut lease| {
                let allocator = allocator.clone();
                tokio::spawn(async move { allocator.renew(&mut lease).await.map(|_| lease) })
            })
            .collect();
        for renewal in renewals {
            leases.push(
                renewal
                    .await
                    .unwrap()
                    .expect("a renewal after the rollback"),
            );
        }
    }
    leases.push(allocator.acquire().await.unwrap());
}

/// Namespaces removed while another handle on the file writes all the time
/// (a lease renewed in a loop): each removal waits its turn for the write
/// lock and succeeds. A transaction that reads before it writes cannot
/// wait: SQLite refuses its write at once when another connection holds
/// the lock or committed since it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removals_wait_for_a_busy_writer_on_the_same_file() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use workerid_core::{Allocator, LeaseOptions, LeaseStore, Namespace};
    use workerid_sql::SqlStore;

    let dir = tempfile::tempdir().unwrap();
    let url = workerid_testkit::sqlite_url(&dir.path().join("busy.db"));
    let writer = SqlStore::connect(&url).await.unwrap();
    let remover = SqlStore::connect(&url).await.unwrap();
    let options = LeaseOptions::new().worker_bits(4);
    let busy = Allocator::new(writer, "busy", options.clone()).unwrap();
    let mut lease = busy.acquire().await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let renewing = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut renewals = 0u64;
            while !stop.load(Ordering::Relaxed) {
                busy.renew(&mut lease).await.expect("a renewal");
                renewals += 1;
            }
            renewals
        }
    });
    for round in 0..100 {
        let name = format!("removed-{round}");
        let allocator = Allocator::new(remover.clone(), &name, options.clone()).unwrap();
        let lease = allocator.acquire().await.unwrap();
        allocator.release(&lease).await.unwrap();
        let removed = remover
            .remove_namespace(&Namespace::new(name).unwrap())
            .await
            .unwrap_or_else(|e| panic!("removal {round} beside a busy writer: {e}"));
        assert!(removed, "removal {round}");
    }
    stop.store(true, Ordering::Relaxed);
    assert!(renewing.await.unwrap() > 0, "the writer wrote meanwhile");
}

/// The file a store creates holds lease tokens: its owner alone reads it,
/// and its write-ahead log, whatever the umask.
#[cfg(unix)]
#[tokio::test]
async fn a_file_the_store_creates_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    // A space and a percent-encoded character in the name, as URLs carry them.
    let file = dir.path().join("leases of a%b.db");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("leases%20of%20a%25b.db").display()
    );
    let store = workerid_sql::SqlStore::connect(&url)
        .await
        .expect("connect");
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600, "{}", file.display());
    let wal = dir.path().join("leases of a%b.db-wal");
    if wal.exists() {
        assert_eq!(mode(&wal), 0o600);
    }
    drop(store);
}
