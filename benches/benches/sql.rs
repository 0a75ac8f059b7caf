//! SQL: acquire, renew and release through the Allocator on PostgreSQL,
//! MariaDB and SQLite, each beside one raw guarded `UPDATE` (with `RETURNING`
//! where the database has it) on the same pool: the physical limit, one
//! round trip. Measured interleaved, so the machine's load drifts over all of
//! them alike.
//!
//! `cargo bench -p benches --bench sql` (starts its own servers).

use sqlx::AssertSqlSafe;
use workerid_servers::mariadb::MariaDbServer;
use workerid_servers::postgres::PostgresServer;
use workerid_sql::{Dialect, SqlStore};

const ROUNDS: usize = 2000;

fn q(sql: &'static str) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
    sqlx::query(AssertSqlSafe(sql))
}

async fn measure(name: &str, url: &str) {
    let store = SqlStore::connect(url).await.expect("connect");
    let pool = store.pool().clone();
    q("CREATE TABLE IF NOT EXISTS bench_raw (k BIGINT PRIMARY KEY, v BIGINT NOT NULL)")
        .execute(&pool)
        .await
        .expect("raw table");
    q("DELETE FROM bench_raw")
        .execute(&pool)
        .await
        .expect("clear");
    q("INSERT INTO bench_raw (k, v) VALUES (1, 0)")
        .execute(&pool)
        .await
        .expect("raw row");
    let raw_sql = match store.dialect() {
        Dialect::MySql => "UPDATE bench_raw SET v = v + 1 WHERE k = 1 AND v >= 0",
        _ => "UPDATE bench_raw SET v = v + 1 WHERE k = 1 AND v >= 0 RETURNING v",
    };
    let allocator = benches::allocator(store, "bench", 16);
    let pool = &pool;
    let raw = move || async move {
        q(raw_sql).execute(pool).await.expect("raw update");
    };
    let raw_name = "raw guarded UPDATE (one round trip)";
    benches::lease_ops_table(name, raw_name, &raw, &allocator, ROUNDS).await;
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let postgres = PostgresServer::start();
    rt.block_on(measure("PostgreSQL", &postgres.url()));
    drop(postgres);
    let mariadb = MariaDbServer::start();
    rt.block_on(measure("MariaDB", &mariadb.url()));
    drop(mariadb);
    let dir = tempfile::tempdir().expect("temporary directory");
    let sqlite = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("bench.db").display()
    );
    rt.block_on(measure("SQLite (WAL, file)", &sqlite));
}
