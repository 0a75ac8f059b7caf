//! TLS and credentials on real etcd members, each started once for this
//! binary: one with TLS for clients, one that also requires client
//! certificates, and one with authentication enabled.

mod support;

use std::time::{Duration, Instant};

use workerid_conformance::secrets::{assert_debug_hides, assert_error_hides, chain, round_trip};
use workerid_core::Error;
use workerid_etcd::EtcdStore;
use workerid_testkit::{
    etcd, tls, PASSWORD, PASSWORD_IN_URL, WRONG_PASSWORD, WRONG_PASSWORD_IN_URL,
};

const SECRETS: [&str; 4] = [
    PASSWORD,
    PASSWORD_IN_URL,
    WRONG_PASSWORD,
    WRONG_PASSWORD_IN_URL,
];

fn builder() -> workerid_etcd::EtcdStoreBuilder {
    EtcdStore::builder().operation_timeout(Duration::from_secs(3))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_ca_given_to_the_builder() {
    let endpoint = etcd::shared_tls_endpoint();
    assert!(endpoint.starts_with("https://"), "{endpoint}");
    let store = builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .connect([endpoint])
        .await
        .expect("connect over TLS");
    round_trip(store, "tls-ca").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_domain_name_of_the_certificate() {
    let store = builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .tls_domain_name("localhost")
        .connect([etcd::shared_tls_endpoint()])
        .await
        .expect("connect over TLS, checking the name localhost");
    round_trip(store, "tls-domain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_a_client_certificate() {
    let (cert, key) = tls::files().client_identity_pem();
    let builder = builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .client_identity_pem(cert, key);
    let shown = format!("{builder:?}");
    assert!(
        !shown.contains("PRIVATE"),
        "the builder's Debug shows the key: {shown}"
    );
    let store = builder
        .connect([etcd::shared_mtls_endpoint()])
        .await
        .expect("connect with a client certificate");
    round_trip(store, "tls-mutual").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_certificate_a_member_that_requires_one_refuses() {
    let started = Instant::now();
    let result = builder()
        .ca_certificate_pem(tls::files().ca_pem())
        .connect([etcd::shared_mtls_endpoint()])
        .await;
    assert!(
        matches!(result, Err(Error::Unavailable { .. })),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_fails_promptly_naming_the_certificate() {
    let started = Instant::now();
    let error = builder()
        .ca_certificate_pem(tls::files().wrong_ca_pem())
        .connect([etcd::shared_tls_endpoint()])
        .await
        .expect_err("a member certificate of another CA must be refused");
    let elapsed = started.elapsed();
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let message = error.to_string();
    assert!(
        message.contains("certificate") && message.contains("TLS"),
        "the message must name TLS and the certificate: {message} (chain: {})",
        chain(&error)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_that_mix_http_and_https_are_refused() {
    let result = builder()
        .connect(["https://127.0.0.1:2379", "http://127.0.0.1:2380"])
        .await;
    assert!(
        matches!(result, Err(Error::InvalidConfig { .. })),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_show_in_no_error_and_no_debug() {
    let endpoint = etcd::shared_auth_endpoint();
    let right = builder().credentials("root", PASSWORD);
    assert_debug_hides("the builder", &right, &SECRETS);
    assert!(format!("{right:?}").contains("root"), "{right:?}");
    let store = right
        .connect([&endpoint])
        .await
        .expect("the right password");
    assert_debug_hides("the store", &store, &SECRETS);
    round_trip(store, "password").await;

    let unreachable = format!("http://127.0.0.1:{}", workerid_testkit::free_port());
    let cases = [
        (
            "a wrong password",
            builder().credentials("root", WRONG_PASSWORD),
            endpoint.clone(),
        ),
        (
            "an unknown user",
            builder().credentials("nobody", PASSWORD),
            endpoint.clone(),
        ),
        (
            "an unreachable port",
            builder().credentials("root", PASSWORD),
            unreachable,
        ),
        (
            "a password in the endpoint",
            builder(),
            endpoint.replacen("http://", &format!("http://root:{PASSWORD_IN_URL}@"), 1),
        ),
        (
            "a raw password in the endpoint",
            builder(),
            endpoint.replacen("http://", &format!("http://root:{PASSWORD}@"), 1),
        ),
    ];
    for (what, builder, endpoint) in cases {
        assert_debug_hides(what, &builder, &SECRETS);
        let error = builder.connect([endpoint]).await.expect_err(what);
        assert_error_hides(what, &error, &SECRETS);
    }
}
