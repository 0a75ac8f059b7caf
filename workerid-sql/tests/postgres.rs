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
