//! TLS and passwords on real PostgreSQL and MariaDB servers, each started
//! once for this binary with TLS and a user with a password (PostgreSQL:
//! scram; TCP connections of `postgres` must use TLS; MariaDB: every TCP
//! connection must use TLS). TLS is set in the URL, as sqlx reads it.

use std::time::{Duration, Instant};

use workerid_conformance::secrets::{assert_debug_hides, assert_error_hides, chain, round_trip};
use workerid_core::Error;
use workerid_sql::SqlStore;
use workerid_testkit::{
    mariadb, postgres, tls, PASSWORD, PASSWORD_IN_URL, WRONG_PASSWORD, WRONG_PASSWORD_IN_URL,
};

const SECRETS: [&str; 4] = [
    PASSWORD,
    PASSWORD_IN_URL,
    WRONG_PASSWORD,
    WRONG_PASSWORD_IN_URL,
];

fn builder() -> workerid_sql::SqlStoreBuilder {
    SqlStore::builder()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(3))
}

async fn wrong_ca_fails_promptly(url: &str) {
    let wrong = url.replace(
        &tls::files().ca_cert().display().to_string(),
        &tls::files().wrong_ca_cert().display().to_string(),
    );
    assert_ne!(wrong, url);
    let started = Instant::now();
    let error = builder()
        .connect(&wrong)
        .await
        .expect_err("a server certificate of another CA must be refused");
    let elapsed = started.elapsed();
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let message = error.to_string();
    assert!(
        message.contains("certificate") || message.contains("TLS") || message.contains("tls"),
        "the message must name the certificate: {message} (chain: {})",
        chain(&error)
    );
}

/// Right password: works; wrong password, unreachable port, malformed URLs:
/// errors that show the password in no form.
async fn passwords_hidden(right: &str, url_with: impl Fn(&str) -> String, scheme: &str, port: u16) {
    let store = builder().connect(right).await.expect("the right password");
    assert_debug_hides("the store", &store, &SECRETS);
    round_trip(store, &format!("password-{scheme}")).await;

    let unreachable_port = workerid_testkit::free_port();
    let path = right
        .split_once(&format!(":{port}"))
        .map(|(_, path)| path)
        .unwrap_or("/");
    let cases = [
        ("a wrong password", url_with(WRONG_PASSWORD)),
        (
            "an unreachable port",
            right.replace(&format!(":{port}/"), &format!(":{unreachable_port}/")),
        ),
        (
            "a malformed URL (raw password)",
            format!(
                "{scheme}://{}:{PASSWORD}@127.0.0.1:{port}{path}",
                workerid_testkit::USER
            ),
        ),
        (
            "a malformed URL (bad port)",
            format!(
                "{scheme}://{}:{PASSWORD_IN_URL}@127.0.0.1:port{path}",
                workerid_testkit::USER
            ),
        ),
        (
            "a malformed URL (bad option)",
            format!("{right}?sslmode=sometimes&ssl-mode=SOMETIMES"),
        ),
        (
            "a password in the query",
            format!(
                "{scheme}://{}@127.0.0.1:{unreachable_port}{path}?password={PASSWORD_IN_URL}",
                workerid_testkit::USER
            ),
        ),
    ];
    for (what, url) in cases {
        assert_ne!(url, right, "{what}");
        let error = builder().connect(&url).await.expect_err(what);
        assert_error_hides(what, &error, &SECRETS);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls_verify_full() {
    let url = postgres::shared_tls_url();
    assert!(url.contains("sslmode=verify-full"), "{url}");
    let store = builder().connect(&url).await.expect("connect over TLS");
    round_trip(store, "tls-postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_refuses_the_postgres_user_without_tls() {
    let url = postgres::shared_secure_server().url() + "?sslmode=disable";
    let error = builder().connect(&url).await.expect_err("hostssl only");
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_with_a_wrong_ca_fails_promptly() {
    wrong_ca_fails_promptly(&postgres::shared_tls_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passwords_show_in_no_error_and_no_debug() {
    let server = postgres::shared_secure_server();
    passwords_hidden(
        &server.url_with_password(PASSWORD),
        |password| server.url_with_password(password),
        "postgres",
        server.port(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_over_tls_verify_identity() {
    let url = mariadb::shared_tls_url();
    assert!(url.contains("ssl-mode=VERIFY_IDENTITY"), "{url}");
    let store = builder().connect(&url).await.expect("connect over TLS");
    round_trip(store, "tls-mariadb").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_refuses_a_connection_without_tls() {
    let url = mariadb::shared_secure_server().url() + "?ssl-mode=DISABLED";
    let error = builder()
        .connect(&url)
        .await
        .expect_err("secure transport only");
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_with_a_wrong_ca_fails_promptly() {
    wrong_ca_fails_promptly(&mariadb::shared_tls_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_passwords_show_in_no_error_and_no_debug() {
    let server = mariadb::shared_secure_server();
    passwords_hidden(
        &server.url_with_password(PASSWORD),
        |password| server.url_with_password(password),
        "mysql",
        server.port(),
    )
    .await;
}
