//! TLS and passwords on real `redis-server`s: a TLS server (client
//! certificates optional), one that requires client certificates, a
//! 3-master TLS cluster, and one with `requirepass`, each started once for
//! this binary.

use std::time::{Duration, Instant};

use workerid_conformance::secrets::{assert_debug_hides, assert_error_hides, chain, round_trip};
use workerid_core::Error;
use workerid_redis::RedisStore;
use workerid_testkit::{
    redis, tls, PASSWORD, PASSWORD_IN_URL, WRONG_PASSWORD, WRONG_PASSWORD_IN_URL,
};

const SECRETS: [&str; 4] = [
    PASSWORD,
    PASSWORD_IN_URL,
    WRONG_PASSWORD,
    WRONG_PASSWORD_IN_URL,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_ca_given_to_the_builder() {
    let store = RedisStore::builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .connect(&redis::shared_tls_url())
        .await
        .expect("connect over TLS");
    round_trip(store, "tls-ca").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_a_client_certificate() {
    let (cert, key) = tls::files().client_identity_pem();
    let builder = RedisStore::builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .client_identity_pem(cert, key.clone());
    let shown = format!("{builder:?}");
    assert!(
        !shown.contains(&String::from_utf8_lossy(&key).to_string()) && !shown.contains("PRIVATE"),
        "the builder's Debug shows the private key: {shown}"
    );
    let store = builder
        .connect(&redis::shared_mtls_url())
        .await
        .expect("connect with a client certificate");
    round_trip(store, "tls-mutual").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_certificate_a_server_that_requires_one_refuses() {
    let result = RedisStore::builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .connect(&redis::shared_mtls_url())
        .await;
    assert!(
        matches!(result, Err(Error::Unavailable { .. })),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_fails_promptly_naming_the_certificate() {
    let started = Instant::now();
    let result = RedisStore::builder()
        .ca_certificate_pem(tls::files().wrong_ca_pem())
        .connect(&redis::shared_tls_url())
        .await;
    let elapsed = started.elapsed();
    let error = result.expect_err("a server certificate of another CA must be refused");
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let message = error.to_string();
    assert!(
        message.contains("certificate") || message.contains("TLS"),
        "the message must name the certificate: {message} (chain: {})",
        chain(&error)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_with_the_ca_given_to_the_builder() {
    let urls = redis::shared_tls_cluster_urls();
    let store = RedisStore::builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .connect_cluster(&urls)
        .await
        .unwrap_or_else(|e| panic!("connect to the TLS cluster at {urls:?}: {e}"));
    round_trip(store, "tls-cluster").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_with_a_wrong_ca_fails_promptly_naming_the_certificate() {
    let urls = redis::shared_tls_cluster_urls();
    let started = Instant::now();
    let result = RedisStore::builder()
        .ca_certificate_pem(tls::files().wrong_ca_pem())
        .connect_cluster(&urls)
        .await;
    let elapsed = started.elapsed();
    let error = result.expect_err("node certificates of another CA must be refused");
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let message = error.to_string();
    assert!(
        message.contains("certificate") || message.contains("TLS"),
        "the message must name the certificate: {message} (chain: {})",
        chain(&error)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_url_to_the_tls_port_is_no_success() {
    let url = redis::shared_tls_url().replacen("rediss://", "redis://", 1);
    let result = RedisStore::builder()
        .connect_timeout(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(1))
        .connect(&url)
        .await;
    assert!(result.is_err(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_show_in_no_error_and_no_debug() {
    let server = redis::shared_password_server();
    let right = server.url_with_password(PASSWORD);
    let store = RedisStore::connect(&right)
        .await
        .expect("connect with the right password");
    assert_debug_hides("the store", &store, &SECRETS);
    round_trip(store, "password").await;

    let builder = RedisStore::builder()
        .connect_timeout(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(1));
    assert_debug_hides("the builder", &builder, &SECRETS);
    let unreachable_port = workerid_testkit::free_port();
    let cases = [
        ("a wrong password", server.url_with_password(WRONG_PASSWORD)),
        (
            "an unreachable port",
            format!("redis://:{PASSWORD_IN_URL}@127.0.0.1:{unreachable_port}/"),
        ),
        (
            "a malformed URL (raw password)",
            format!("redis://:{PASSWORD}@127.0.0.1:{}/", server.port()),
        ),
        (
            "a malformed URL (bad port)",
            format!("redis://:{PASSWORD_IN_URL}@127.0.0.1:port/"),
        ),
        (
            "a malformed URL (bad database)",
            format!("redis://:{PASSWORD_IN_URL}@127.0.0.1:{}/x", server.port()),
        ),
        (
            "TLS to a plain port",
            format!("rediss://:{PASSWORD_IN_URL}@127.0.0.1:{}/", server.port()),
        ),
    ];
    for (what, url) in cases {
        let result = builder.clone().connect(&url).await;
        let error = result.expect_err(what);
        assert_error_hides(what, &error, &SECRETS);
    }
    let cluster = builder
        .clone()
        .connect_cluster(&[format!(
            "redis://:{PASSWORD_IN_URL}@127.0.0.1:{unreachable_port}/"
        )])
        .await
        .expect_err("a cluster on an unreachable port");
    assert_error_hides("a cluster on an unreachable port", &cluster, &SECRETS);
    let cluster = builder
        .connect_cluster(&[format!("redis://:{PASSWORD}@127.0.0.1:port/")])
        .await
        .expect_err("a malformed cluster URL");
    assert_error_hides("a malformed cluster URL", &cluster, &SECRETS);
}
