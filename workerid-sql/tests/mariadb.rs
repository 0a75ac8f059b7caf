//! The conformance suite on a real MariaDB server (started once for this test
//! binary, or the MySQL/MariaDB server `WORKERID_MYSQL_URL` names).

mod support;

workerid_conformance::lease_store_tests!(support::Database {
    url: workerid_servers::mariadb::shared_url()
});

workerid_conformance::segment_store_tests!(support::Database {
    url: workerid_servers::mariadb::shared_url()
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_renew_in_one_namespace_without_error() {
    support::renewal_storm(&workerid_servers::mariadb::shared_url()).await;
}
