//! The conformance suite on a real PostgreSQL server (started once for this
//! test binary, or the one `WORKERID_POSTGRES_URL` names).

mod support;

workerid_conformance::lease_store_tests!(support::Database {
    url: workerid_testkit::postgres::shared_url()
});

workerid_conformance::segment_store_tests!(support::Database {
    url: workerid_testkit::postgres::shared_url()
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_renew_in_one_namespace_without_error() {
    support::renewal_storm(&workerid_testkit::postgres::shared_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_segment_rows_are_refused() {
    support::bad_segment_rows_are_refused(&workerid_testkit::postgres::shared_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_table_kept_as_it_is() {
    support::a_segment_table_kept_as_it_is(&workerid_testkit::postgres::shared_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alter_behind_a_held_table_gives_up_in_time() {
    support::an_alter_behind_a_held_table_gives_up_in_time(
        &workerid_testkit::postgres::shared_url(),
    )
    .await;
}

/// Acquirers racing for released IDs never deadlock. The acquire function's
/// fast path can leave a row locked that it passed over (another acquirer
/// took it first), and the call then waits for the namespace's row: the
/// holder of that row must not wait for the lock in turn. The contention
/// scenario, five times in a database of its own, whose deadlocks the
/// server counts (`pg_stat_database.deadlocks`, kept by each server process
/// until it ends: the test waits for them all to end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_racing_for_released_ids_never_deadlock() {
    use sqlx::AssertSqlSafe;
    use std::time::{Duration, Instant};

    let shared = workerid_testkit::postgres::shared_url();
    let admin = workerid_sql::SqlStore::connect(&shared)
        .await
        .expect("connect");
    let database = format!("deadlock_check_{:08x}", rand::random::<u32>());
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(admin.pool())
        .await
        .expect("create the database");
    let (base, options) = match shared.split_once('?') {
        Some((base, options)) => (base, format!("?{options}")),
        None => (shared.as_str(), String::new()),
    };
    let (server, _) = base.rsplit_once('/').expect("a URL with a database name");
    let url = format!("{server}/{database}{options}");
    support::race_for_released_ids(&url).await;
    let count = |statement: &str| {
        sqlx::query_scalar::<_, i64>(AssertSqlSafe(statement.to_string()))
            .bind(database.clone())
            .fetch_one(admin.pool())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while count("SELECT count(*) FROM pg_stat_activity WHERE datname = $1")
        .await
        .expect("count the database's sessions")
        > 0
    {
        assert!(Instant::now() < deadline, "sessions left open for 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadlocks = count("SELECT deadlocks FROM pg_stat_database WHERE datname = $1")
        .await
        .expect("read the deadlock count");
    sqlx::query(AssertSqlSafe(format!("DROP DATABASE {database}")))
        .execute(admin.pool())
        .await
        .expect("drop the database");
    assert_eq!(deadlocks, 0, "acquires racing for released IDs deadlocked");
}

/// Connecting (which makes sure the schema is there) waits for no
/// transaction writing to the lease table, so it holds none back: a lease
/// write left open by another session does not hold it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_waits_for_no_lease_write() {
    use std::time::Duration;

    let url = workerid_testkit::postgres::shared_url();
    let first = workerid_sql::SqlStore::connect(&url)
        .await
        .expect("connect");
    let mut writing = first.pool().begin().await.expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {} SET holder = holder WHERE 1 = 0",
        workerid_sql::DEFAULT_TABLE
    )))
    .execute(&mut *writing)
    .await
    .expect("a write on the lease table");
    let connected = tokio::time::timeout(
        Duration::from_secs(10),
        workerid_sql::SqlStore::connect(&url),
    )
    .await;
    writing.rollback().await.expect("rollback");
    connected
        .expect("connecting waited for a transaction writing to the lease table")
        .expect("connect");
}
