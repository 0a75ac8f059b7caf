//! SQL: acquire, renew and release through the Allocator on PostgreSQL,
//! MariaDB and SQLite, each beside one raw guarded `UPDATE` (with `RETURNING`
//! where the database has it) on the same pool: the physical limit, one
//! round trip. Measured interleaved, so the machine's load drifts over all of
//! them alike.
//!
//! `cargo bench -p benches --bench sql` (starts its own servers).

use workerid::sql::SqlStore;
use workerid_testkit::mariadb::MariaDbServer;
use workerid_testkit::postgres::PostgresServer;

const ROUNDS: usize = 2000;

async fn measure(name: &str, url: &str) {
    let store = SqlStore::connect(url).await.expect("connect");
    let raw = benches::sql_raw_update(&store).await;
    let allocator = benches::allocator(store, "bench", 16);
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
    let sqlite = workerid_testkit::sqlite_url(&dir.path().join("bench.db"));
    rt.block_on(measure("SQLite (WAL, file)", &sqlite));
    benches::record::record_transcript("sql", "cargo bench -p benches --bench sql");
}
