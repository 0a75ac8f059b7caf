//! `workerid::open` on every store kind, started by the test kit: the URL
//! opens a store that works for leases and segments; bad URLs are typed
//! errors before any I/O; no error shows a password.

#[cfg(not(feature = "all"))]
compile_error!(
    "the facade's tests open every store: run them with `--features all` \
     (bash scripts/test.sh and cargo test --workspace turn it on)"
);

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use workerid::segment::{SegmentAllocator, SegmentOptions, SegmentStore};
use workerid::{Allocator, LeaseOptions, LeaseStore, OpenError, OpenOptions, StoreKind};
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_testkit::StoreKind as Server;

/// Leases and segments through the handle `url` opens.
async fn works(url: &str, kind: StoreKind) {
    let store = workerid::open(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert_eq!(store.kind(), kind);
    let ns = format!("open-{}", rand_suffix());
    let allocator =
        Allocator::new(store.clone(), &ns, LeaseOptions::new().worker_bits(4)).expect("allocator");
    let mut lease = allocator.acquire().await.expect("acquire");
    allocator.renew(&mut lease).await.expect("renew");
    allocator.release(&lease).await.expect("release");
    let segments = SegmentAllocator::new(store, SegmentOptions::default());
    let tag = format!("open-{}", rand_suffix());
    segments.create_tag(&tag, 7, 10).await.expect("create tag");
    assert_eq!(segments.next_id(&tag).await.expect("segment ID"), 7);
    segments.shutdown().await;
}

fn rand_suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_opens_by_url() {
    for (server, kind) in [
        (Server::Memory, StoreKind::Memory),
        (Server::Sqlite, StoreKind::Sqlite),
        (Server::Redis, StoreKind::Redis),
        (Server::RedisCluster, StoreKind::RedisCluster),
        (Server::Etcd, StoreKind::Etcd),
        (Server::Postgres, StoreKind::Postgres),
        (Server::MariaDb, StoreKind::MySql),
    ] {
        let url = tokio::task::spawn_blocking(move || server.shared_url())
            .await
            .expect("the server starts");
        works(&url, kind).await;
    }
}

#[tokio::test]
async fn bad_urls_are_typed_errors_before_any_io() {
    type Expected = fn(&OpenError) -> bool;
    let cases: &[(&str, Expected)] = &[
        ("ftp://h/", |e| matches!(e, OpenError::UnknownScheme { .. })),
        ("localhost:6379", |e| {
            matches!(e, OpenError::UnknownScheme { .. })
        }),
        ("redis://h:1/?prefx=x", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis://a:1,b:2/", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis://h:1/?durable=maybe", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis://h:1/?cacert=/ca.pem", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("rediss://h:1/?cert=/c.pem", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis+cluster://a:1/0", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis+sentinel://a:1,b:2/", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        // Sentinel URLs have no TLS scheme to point to.
        ("redis+sentinel://a:1/m?cacert=/ca.pem", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis+sentinel://a:1/m?wait_replicas=two", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis://h:1/?wait_replicas=-1", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("etcd://", |e| matches!(e, OpenError::BadUrl { .. })),
        // No "//": the rest is no host, and the password still hidden.
        ("postgres:ops:hunter2@127.0.0.1/db", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("redis::hunter2@127.0.0.1:1/", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("etcd://:pw@a:1", |e| matches!(e, OpenError::BadUrl { .. })),
        ("etcd://a:port", |e| matches!(e, OpenError::BadUrl { .. })),
        ("memory://somewhere", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("etcds://a:1?cacert=/nonexistent/ca.pem", |e| {
            matches!(e, OpenError::File { .. })
        }),
        // A database number that decodes to more than digits.
        ("rediss://127.0.0.1:1/0%23insecure", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("rediss://127.0.0.1:1/0?protocol=3%23insecure", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        // A raw '?' in a password.
        ("redis://:hunter2?x@127.0.0.1:6379/", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("etcds://root:s3cretpw?cacert=/x@127.0.0.1:2379", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        ("postgres://ops:hunter2?x@127.0.0.1:1/db", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
        // A parameter sqlx does not read.
        (
            "postgres://ops@127.0.0.1:1/ids?sslpassword=keyPassphrase1",
            |e| matches!(e, OpenError::BadUrl { .. }),
        ),
        ("mysql://ops@127.0.0.1:1/ids?password=keyPassphrase1", |e| {
            matches!(e, OpenError::BadUrl { .. })
        }),
    ];
    for (url, expected) in cases {
        let started = Instant::now();
        let err = workerid::open(url).await.expect_err(url);
        assert!(expected(&err), "{url}: {err:?}");
        let shown = format!("{err}\n{err:?}");
        for secret in ["hunter2", "s3cretpw", "keyPassphrase1"] {
            assert!(!shown.contains(secret), "{url} shows {secret}: {shown}");
        }
        assert!(!err.is_retryable(), "{url}");
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{url}: no I/O"
        );
    }
}

#[tokio::test]
async fn an_unreachable_store_is_retryable_and_prompt() {
    let port = workerid_testkit::free_port();
    for url in [
        format!("redis://127.0.0.1:{port}/"),
        format!("etcd://127.0.0.1:{port}"),
        format!("postgres://u:pw@127.0.0.1:{port}/db"),
        format!("mysql://u:pw@127.0.0.1:{port}/db"),
    ] {
        let started = Instant::now();
        let err = OpenOptions::new()
            .connect_timeout(Duration::from_secs(2))
            .request_timeout(Duration::from_secs(2))
            .open(&url)
            .await
            .expect_err(&url);
        assert!(
            matches!(err, OpenError::Unreachable { .. }),
            "{url}: {err:?}"
        );
        assert!(err.is_retryable());
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{url}: {:?}",
            started.elapsed()
        );
    }
}

/// The request timeout holds on a SQL store too: a server that stops
/// answering (frozen, or a statement waiting for a lock) fails each call
/// with `Unavailable` once the timeout passes, rather than holding it.
#[tokio::test(flavor = "multi_thread")]
async fn a_sql_server_that_stops_answering_fails_calls_at_the_request_timeout() {
    let server = tokio::task::spawn_blocking(workerid_testkit::postgres::PostgresServer::start)
        .await
        .expect("PostgreSQL starts");
    let store = OpenOptions::new()
        .request_timeout(Duration::from_secs(1))
        .open(&server.url())
        .await
        .expect("open");
    let allocator = Allocator::new(store.clone(), "frozen", LeaseOptions::new().worker_bits(4))
        .expect("allocator");
    allocator
        .acquire()
        .await
        .expect("acquire while the server answers");
    server.process().pause();
    let started = Instant::now();
    let listed = store
        .list(&workerid::Namespace::new("frozen").unwrap())
        .await;
    let waited = started.elapsed();
    server.process().resume();
    assert!(
        matches!(listed, Err(workerid::Error::Unavailable { .. })),
        "{listed:?}"
    );
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(5),
        "answered after {waited:?}"
    );
    let tag = workerid::segment::Tag::new("frozen").unwrap();
    server.process().pause();
    let reserved = store.reserve(&tag, None).await;
    server.process().resume();
    assert!(
        matches!(reserved, Err(workerid::segment::Error::Unavailable { .. })),
        "{reserved:?}"
    );
}

/// Every error and `Debug` output of `open`, for URLs that carry a password
/// with `/` and `@` in it (percent-encoded, as a URL must), on stores that are
/// down or refuse: the password never shows, raw or encoded.
#[tokio::test]
async fn no_error_shows_the_password() {
    let secret = "s3/cr@t-pw";
    let encoded = "s3%2Fcr%40t-pw";
    let port = workerid_testkit::free_port();
    let urls = [
        format!("redis://:{encoded}@127.0.0.1:{port}/"),
        format!("redis://user:{encoded}@127.0.0.1:{port}/?prefx=typo"),
        format!("rediss://:{encoded}@127.0.0.1:{port}/?cacert=/nonexistent.pem"),
        format!("redis+cluster://:{encoded}@127.0.0.1:{port},127.0.0.1:{port}"),
        format!("etcd://root:{encoded}@127.0.0.1:{port}/app"),
        format!("etcd://root:{encoded}@127.0.0.1:notaport"),
        format!("postgres://ops:{encoded}@127.0.0.1:{port}/db"),
        format!("postgres://ops@127.0.0.1:{port}/db?password={encoded}"),
        format!("mysql://ops:{encoded}@127.0.0.1:{port}/db"),
        format!("mariadb://ops:{encoded}@127.0.0.1:{port}/db?ssl-mode=nonsense"),
        format!("ftp://ops:{encoded}@127.0.0.1/"),
        // A password typed without encoding: the URL is broken, the
        // password still hidden.
        format!("postgres://ops:{secret}@127.0.0.1:{port}/db"),
        format!("redis://:{secret}@127.0.0.1:{port}/"),
    ];
    for url in &urls {
        let err = OpenOptions::new()
            .connect_timeout(Duration::from_secs(1))
            .request_timeout(Duration::from_secs(1))
            .open(url)
            .await
            .expect_err(url);
        let shown = format!("{err}\n{err:?}");
        for needle in [secret, encoded, "s3/cr", "cr@t"] {
            assert!(!shown.contains(needle), "{url} shows {needle:?}:\n{shown}");
        }
    }
}

/// A parameter sqlx does not read is refused before sqlx sees it: sqlx's
/// PostgreSQL driver logs such a parameter with its value.
#[tokio::test]
async fn a_parameter_sqlx_does_not_read_is_never_logged() {
    #[derive(Clone, Default)]
    struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let port = workerid_testkit::free_port();
    for url in [
        format!("postgres://ops@127.0.0.1:{port}/ids?sslpassword=keyPassphrase1"),
        format!("postgres://ops@127.0.0.1:{port}/ids?sslmode=disable&x%2Dkey=keyPassphrase1"),
    ] {
        let err = OpenOptions::new()
            .connect_timeout(Duration::from_secs(1))
            .open(&url)
            .await
            .expect_err(&url);
        assert!(matches!(err, OpenError::BadUrl { .. }), "{url}: {err:?}");
        assert!(
            !format!("{err}\n{err:?}").contains("keyPassphrase1"),
            "{err}"
        );
    }
    let logged =
        String::from_utf8_lossy(&lines.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    assert!(!logged.contains("keyPassphrase1"), "{logged}");
}

/// The conformance suite on a store opened by URL: `AnyStore` forwards
/// every method of both traits.
struct Opened(workerid::AnyStore);

#[async_trait]
impl StoreFactory for Opened {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        self.0.lease_store()
    }
}

#[async_trait]
impl SegmentFactory for Opened {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        self.0.segment_store()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_conformance_suites_pass_through_any_store() {
    let store = workerid::open("memory://").await.expect("memory");
    let opened = Opened(store);
    workerid_conformance::run_all(&opened).await.assert_passed();
    workerid_conformance::run_all_segments(&opened)
        .await
        .assert_passed();
}

/// TLS chosen by URL, on every store that speaks it (a Redis Cluster too):
/// the right CA works (also with a client certificate), a wrong CA is a
/// prompt error that names the certificate.
#[tokio::test(flavor = "multi_thread")]
async fn tls_by_url_on_every_store() {
    use workerid_testkit::{etcd, mariadb, postgres, redis, tls};
    let (redis_tls, redis_mtls, cluster_tls, etcd_tls, etcd_mtls, pg_tls, maria_tls) =
        tokio::task::spawn_blocking(|| {
            (
                redis::shared_tls_url(),
                redis::shared_mtls_url(),
                redis::shared_tls_cluster_urls(),
                etcd::shared_tls_endpoint(),
                etcd::shared_mtls_endpoint(),
                postgres::shared_tls_url(),
                mariadb::shared_tls_url(),
            )
        })
        .await
        .expect("the TLS servers start");
    let files = tls::files();
    let ca = files.ca_cert().display().to_string();
    let wrong = files.wrong_ca_cert().display().to_string();
    let identity = format!(
        "cert={}&key={}",
        files.client_cert().display(),
        files.client_key().display()
    );
    let etcds = |endpoint: &str| endpoint.replacen("https://", "etcds://", 1);
    // `rediss://127.0.0.1:P/` for each node becomes one
    // `rediss+cluster://127.0.0.1:P1,127.0.0.1:P2,...` URL.
    let cluster_hosts: Vec<&str> = cluster_tls
        .iter()
        .map(|url| url.trim_start_matches("rediss://").trim_end_matches('/'))
        .collect();
    let rediss_cluster = format!("rediss+cluster://{}", cluster_hosts.join(","));
    works(&format!("{redis_tls}?cacert={ca}"), StoreKind::Redis).await;
    works(
        &format!("{redis_mtls}?cacert={ca}&{identity}"),
        StoreKind::Redis,
    )
    .await;
    works(
        &format!("{rediss_cluster}?cacert={ca}"),
        StoreKind::RedisCluster,
    )
    .await;
    works(
        &format!("{}?cacert={ca}", etcds(&etcd_tls)),
        StoreKind::Etcd,
    )
    .await;
    works(
        &format!("{}?cacert={ca}&{identity}", etcds(&etcd_mtls)),
        StoreKind::Etcd,
    )
    .await;
    works(&pg_tls, StoreKind::Postgres).await;
    works(&maria_tls, StoreKind::MySql).await;

    for url in [
        format!("{redis_tls}?cacert={wrong}"),
        format!("{rediss_cluster}?cacert={wrong}"),
        format!("{}?cacert={wrong}", etcds(&etcd_tls)),
        pg_tls.replace(&ca, &wrong),
        maria_tls.replace(&ca, &wrong),
    ] {
        let started = Instant::now();
        let err = OpenOptions::new()
            .connect_timeout(Duration::from_secs(3))
            .open(&url)
            .await
            .expect_err(&url);
        let said = err.to_string().to_lowercase();
        assert!(
            said.contains("certificate") || said.contains("issuer") || said.contains("tls"),
            "{url}: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{url}: {:?}",
            started.elapsed()
        );
    }
}

/// Stores that check a password: the right one opens, a wrong one is
/// refused without showing either.
#[tokio::test(flavor = "multi_thread")]
async fn passwords_by_url_on_every_store() {
    use workerid_testkit::{
        etcd, mariadb, postgres, redis, PASSWORD_IN_URL, WRONG_PASSWORD_IN_URL,
    };
    let (redis_server, etcd_auth, pg, maria) = tokio::task::spawn_blocking(|| {
        (
            redis::shared_password_server(),
            etcd::shared_auth_endpoint(),
            postgres::shared_secure_server(),
            mariadb::shared_secure_server(),
        )
    })
    .await
    .expect("the servers start");
    let etcd_host = etcd_auth.trim_start_matches("http://").to_string();
    let urls = |password: &str| {
        let encoded = workerid_testkit::url_encode(password);
        [
            (redis_server.url_with_password(password), StoreKind::Redis),
            (
                format!("etcd://root:{encoded}@{etcd_host}"),
                StoreKind::Etcd,
            ),
            (pg.url_with_password(password), StoreKind::Postgres),
            (maria.url_with_password(password), StoreKind::MySql),
        ]
    };
    for (url, kind) in urls(workerid_testkit::PASSWORD) {
        works(&url, kind).await;
    }
    for (url, _) in urls(workerid_testkit::WRONG_PASSWORD) {
        let err = OpenOptions::new()
            .connect_timeout(Duration::from_secs(3))
            .request_timeout(Duration::from_secs(3))
            .open(&url)
            .await
            .expect_err(&url);
        assert!(
            matches!(err, OpenError::AccessDenied { .. }),
            "{url}: {err:?}"
        );
        let shown = format!("{err}\n{err:?}");
        for secret in [
            workerid_testkit::PASSWORD,
            PASSWORD_IN_URL,
            workerid_testkit::WRONG_PASSWORD,
            WRONG_PASSWORD_IN_URL,
        ] {
            assert!(!shown.contains(secret), "{url}: {shown}");
        }
    }
}
