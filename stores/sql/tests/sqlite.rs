//! The conformance suite on SQLite: one database file in WAL mode for this
//! test binary, each handle a pool of its own on it.

use std::sync::OnceLock;

mod support;

fn url() -> String {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"));
    format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("leases.db").display()
    )
}

workerid_conformance::lease_store_tests!(support::Database { url: url() });

workerid_conformance::segment_store_tests!(support::Database { url: url() });

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_segment_rows_are_refused() {
    support::bad_segment_rows_are_refused(&url()).await;
}
