//! The configuration is checked before anything touches the store, tags
//! the store contradicts are refused, exit codes tell the cause, and the
//! metrics do not report a disabled feature as down.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Launch, Server};
use workerid::segment::SegmentStore;
use workerid::LeaseStore;

/// Runs the server with `config` as its file (and `args`); it must exit.
fn run_with(dir: &Path, config: &str, args: &[&str]) -> Output {
    let path = dir.join("bad.toml");
    std::fs::write(&path, config).expect("write the config");
    Command::new(env!("CARGO_BIN_EXE_workerid-server"))
        .arg("--config")
        .arg(&path)
        .args(args)
        .output()
        .expect("run the server")
}

#[test]
fn a_bad_config_exits_2_and_leaves_the_store_untouched() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("untouched.db");
    let store = format!("store = \"{}\"\n", workerid_testkit::sqlite_url(&db));
    for (bad, says) in [
        (
            "[[tags]]\nname = \"a\"\n[[tags]]\nname = \"a\"\n",
            "given twice",
        ),
        ("[[tags]]\nname = \"has space\"\n", "has space"),
        ("[[tags]]\nname = \"a\"\nstep = 0\n", "step"),
        ("[[tags]]\nname = \"a\"\nfirst_id = 0\n", "first_id"),
        ("[snowflake]\nttl_secs = 0\n", "ttl_secs"),
        (
            "[snowflake]\nnamespace = \"no spaces allowed\"\n",
            "namespace",
        ),
        ("[snowflake]\nmax_worker_id = 5000\n", "max_worker_id"),
        ("[snowflake]\nlayout = \"leaf\"\n", "classic, sonyflake"),
        (
            "[snowflake]\nlayout = \"js-safe\"\nmax_worker_id = 256\n",
            "js-safe layout's worker bits (at most 255)",
        ),
        (
            "max_open_connections = 18446744073709551615\n",
            "max_open_connections",
        ),
        ("[snowflake]\nholder = \"has space\"\n", "snowflake.holder"),
        ("nonsense = 1\n", "nonsense"),
    ] {
        let out = run_with(dir.path(), &format!("{store}{bad}"), &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains(says), "{bad}: {stderr}");
        assert!(!db.exists(), "{bad}: the store was touched");
    }
}

#[test]
fn a_config_file_error_never_quotes_a_secret() {
    let dir = tempfile::tempdir().expect("a directory");
    for bad in [
        "store = \"postgres://ops:s3cretpw@db/ids\n",
        "auth_token = \"s3cretpw\" trailing\n",
        "store = \"postgres://ops:s3cretpw@db/ids\"\nworkers = \"many\"\n",
    ] {
        let out = run_with(dir.path(), bad, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("line"), "{bad}: {stderr}");
        assert!(!stderr.contains("s3cretpw"), "{bad}: {stderr}");
    }
}

#[test]
fn an_address_that_cannot_be_bound_exits_4_before_the_store_is_touched() {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("untouched.db");
    let config = format!("store = \"{}\"\n", workerid_testkit::sqlite_url(&db));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("its address").to_string();
    let out = run_with(dir.path(), &config, &["--listen", &address]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(!db.exists(), "the store was touched");
}

#[test]
fn an_unreachable_store_exits_3() {
    let dir = tempfile::tempdir().expect("a directory");
    let port = workerid_testkit::free_port();
    let config = format!("store = \"redis://127.0.0.1:{port}/\"\n");
    let listen = format!("127.0.0.1:{}", workerid_testkit::free_port());
    let out = run_with(dir.path(), &config, &["--listen", &listen]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tag_stored_with_another_step_is_refused() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = common::sqlite(dir.path());
    let store = workerid::open(&url).await.expect("the store");
    let tag = workerid::segment::Tag::new("test").expect("a tag");
    // The tests' config says step 100 for "test".
    assert!(store.create_tag(&tag, 1, 250).await.expect("create"));
    let config = format!(
        "store = \"{url}\"\nlisten = \"127.0.0.1:{}\"\n{}",
        workerid_testkit::free_port(),
        common::TAGS
    );
    let out = run_with(dir.path(), &config, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("exists with step 250"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_default_tag_unless_the_store_is_the_zero_config_one() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = common::sqlite(dir.path());
    let config = format!(
        "store = \"{url}\"\nlisten = \"127.0.0.1:{}\"\n[snowflake]\nenabled = false\n",
        workerid_testkit::free_port()
    );
    let path = dir.path().join("notags.toml");
    std::fs::write(&path, config).expect("write");
    let log = dir.path().join("notags.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_workerid-server"))
        .arg("--config")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("the log"))
        .spawn()
        .expect("start");
    // Once the database has the tables, the server has made its tags.
    let deadline = Instant::now() + Duration::from_secs(30);
    let store = loop {
        if let Ok(store) = workerid::OpenOptions::new()
            .read_only(true)
            .open(&url)
            .await
        {
            break store;
        }
        if let Some(status) = child.try_wait().expect("the server's status") {
            panic!(
                "the server exited ({status}) before it made its tables: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "no tables after 30 s: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let tags = store.list_tags().await.expect("list");
    let _ = child.kill();
    let _ = child.wait();
    assert!(tags.is_empty(), "{tags:?}");
}

#[test]
fn metrics_leave_out_a_disabled_lease_and_unknown_tags_are_no_store_errors() {
    let dir = tempfile::tempdir().expect("a directory");
    let server = Server::launch(
        dir.path(),
        &common::sqlite(dir.path()),
        &Launch {
            tables: "[snowflake]\nenabled = false\n",
            ..Launch::default()
        },
    );
    for i in 0..20 {
        server.get(&format!("/api/segment/get/unknown{i}"));
    }
    let (_, metrics) = server.get("/metrics");
    assert!(!metrics.contains("workerid_lease_ready"), "{metrics}");
    assert_eq!(server.metric("workerid_store_errors_total"), 0);
}

/// The configured holder label is stored with the lease (the operator's
/// listing shows it) and named by the `workerid_lease_info` metric.
#[tokio::test(flavor = "multi_thread")]
async fn the_holder_label_is_stored_and_shown() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = common::sqlite(dir.path());
    let server = Server::launch(
        dir.path(),
        &url,
        &Launch {
            tables: "[snowflake]\nholder = \"prod/orders-7f9c:1\"\n",
            ..Launch::default()
        },
    );
    let (_, metrics) = server.get("/metrics");
    let info = metrics
        .lines()
        .find(|l| l.starts_with("workerid_lease_info{"))
        .unwrap_or_else(|| panic!("no workerid_lease_info: {metrics}"));
    assert!(
        info.starts_with(
            "workerid_lease_info{namespace=\"workerid-server\",holder=\"prod/orders-7f9c:1\",worker_id=\""
        ) && info.ends_with("\"} 1"),
        "{info}"
    );
    let store = workerid::open(&url).await.expect("the store");
    let ns = workerid::Namespace::new("workerid-server").expect("namespace");
    let listing = store.list(&ns).await.expect("list");
    let live: Vec<_> = listing.live().map(|l| l.holder.as_str()).collect();
    assert_eq!(live, ["prod/orders-7f9c:1"], "{listing:?}");
}

/// A SIGTERM while the server waits to join its snowflake worker (the
/// worker ID's previous holder reserved time ahead) stops it promptly, and
/// it holds no lease afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn a_sigterm_during_the_start_up_wait_releases_what_was_taken() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = common::sqlite(dir.path());
    let tables = "[snowflake]\nmax_worker_id = 0\nttl_secs = 30\n";
    let first = Server::launch(
        dir.path(),
        &url,
        &Launch {
            tables,
            ..Launch::default()
        },
    );
    assert!(first.terminate().success());
    // The next holder of worker ID 0 waits for the first one's window.
    let config = dir.path().join("second.toml");
    std::fs::write(
        &config,
        format!(
            "store = \"{url}\"\nlisten = \"127.0.0.1:{}\"\n{}{tables}",
            workerid_testkit::free_port(),
            common::TAGS
        ),
    )
    .expect("write");
    let mut second = Command::new(env!("CARGO_BIN_EXE_workerid-server"))
        .arg("--config")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let signalled = Instant::now();
    // SAFETY: a plain signal to our own child.
    unsafe {
        libc::kill(second.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = common::exit_within(&mut second, Duration::from_secs(30))
        .expect("the second server exits within 30 s of SIGTERM");
    println!("stopped {:?} after SIGTERM", signalled.elapsed());
    assert!(status.success(), "{status}");
    assert!(signalled.elapsed() < Duration::from_secs(10));
    let store = workerid::open(&url).await.expect("the store");
    let ns = workerid::Namespace::new("workerid-server").expect("namespace");
    let listing = store.list(&ns).await.expect("list");
    assert_eq!(listing.live().count(), 0, "{listing:?}");
}

#[test]
fn completions_name_the_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_workerid-server"))
            .args(["--completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        for flag in ["store", "listen", "max-batch", "auth-token"] {
            assert!(script.contains(flag), "{shell}: no {flag}");
        }
    }
}

/// Runs the server with `config` as its file (and `args`) for up to 20 s:
/// its exit code (None when it was still running, then killed) and what it
/// printed. A server that starts where it should have refused fails the
/// test instead of holding it up.
fn exit_of(dir: &Path, config: &str, args: &[&str]) -> (Option<i32>, String) {
    let (mut child, log) = spawn_logged(dir, config, args);
    let status = common::exit_within(&mut child, Duration::from_secs(20));
    let printed = std::fs::read_to_string(&log).unwrap_or_default();
    (status.and_then(|s| s.code()), printed)
}

/// Starts the server with `config` as its file (and `args`), everything it
/// prints going to a log in `dir`: the process, and the log's path.
fn spawn_logged(dir: &Path, config: &str, args: &[&str]) -> (std::process::Child, PathBuf) {
    let path = dir.join("server-under-test.toml");
    std::fs::write(&path, config).expect("write the config");
    let log = dir.join("server-under-test.log");
    let output = std::fs::File::create(&log).expect("the log");
    let child = Command::new(env!("CARGO_BIN_EXE_workerid-server"))
        .arg("--config")
        .arg(&path)
        .args(args)
        .stdout(output.try_clone().expect("the log, twice"))
        .stderr(output)
        .spawn()
        .expect("start");
    (child, log)
}

/// A lease setting the store refuses (etcd keeps leases of 2 s or more) is
/// found before the start-up tags are written: exit 2 writes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_lease_setting_the_store_refuses_exits_2_before_a_tag_is_written() {
    let endpoints = workerid_testkit::etcd::shared_endpoints();
    let hosts: Vec<&str> = endpoints
        .iter()
        .map(|e| e.trim_start_matches("http://"))
        .collect();
    let dir = tempfile::tempdir().expect("a directory");
    // A key prefix of its own, so that reruns against a shared etcd start afresh.
    let prefix = format!("refused-ttl-{}", std::process::id());
    let url = format!("etcd://{}/{prefix}", hosts.join(","));
    let config = format!(
        "store = \"{url}\"\nlisten = \"127.0.0.1:{}\"\n\
         [[tags]]\nname = \"partial\"\n[snowflake]\nttl_secs = 1\n",
        workerid_testkit::free_port()
    );
    let (code, printed) = exit_of(dir.path(), &config, &[]);
    assert_eq!(code, Some(2), "{printed}");
    assert!(
        printed.contains("shorter than this store's minimum"),
        "{printed}"
    );
    assert!(!printed.contains("tag ready"), "{printed}");
    let store = workerid::open(&url).await.expect("the store");
    let tags = store.list_tags().await.expect("list");
    assert!(tags.is_empty(), "a tag was written: {tags:?}");
}

/// The top of a config file on a SQLite file in `dir` that a refused start
/// must never create: the file's path, and the text.
fn untouched_sqlite(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let db = dir.join("untouched.db");
    let top = format!(
        "store = \"{}\"\nlisten = \"127.0.0.1:{}\"\n",
        workerid_testkit::sqlite_url(&db),
        workerid_testkit::free_port()
    );
    (db, top)
}

/// A ttl beyond a day is refused before the store is touched, from the file
/// or from the flag (the largest u64 included).
#[test]
fn a_ttl_beyond_a_day_exits_2_and_leaves_the_store_untouched() {
    let dir = tempfile::tempdir().expect("a directory");
    let (db, top) = untouched_sqlite(dir.path());
    for (tables, args) in [
        ("[snowflake]\nttl_secs = 86401\n", &[][..]),
        ("", &["--snowflake-ttl-secs", "18446744073709551615"][..]),
    ] {
        let (code, printed) = exit_of(dir.path(), &format!("{top}{tables}"), args);
        assert_eq!(code, Some(2), "{tables}{args:?}: {printed}");
        assert!(
            printed.contains("snowflake.ttl_secs") && printed.contains("86400"),
            "{tables}{args:?}: {printed}"
        );
        assert!(!db.exists(), "{tables}{args:?}: the store was touched");
    }
}

/// A token no client can send (gRPC metadata and HTTP header values take
/// visible ASCII only) is refused at start, and the error does not show it.
#[test]
fn an_auth_token_no_client_can_send_exits_2_without_showing_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let (db, top) = untouched_sqlite(dir.path());
    for token in [
        "s3cret\u{1}x",
        "s3cret\u{7f}x",
        "s3cret\nx",
        "s3cret\tx",
        "s3cret x",
        "s3cr\u{e9}tx",
    ] {
        let (code, printed) = exit_of(dir.path(), &top, &["--auth-token", token]);
        assert_eq!(code, Some(2), "{token:?}: {printed}");
        assert!(printed.contains("auth_token"), "{token:?}: {printed}");
        assert!(!printed.contains("s3cr"), "{token:?}: {printed}");
        assert!(!db.exists(), "{token:?}: the store was touched");
    }
    let (code, printed) = exit_of(
        dir.path(),
        &format!("{top}auth_token = \"s3cret\\u0001x\"\n"),
        &[],
    );
    assert_eq!(code, Some(2), "{printed}");
    assert!(!printed.contains("s3cr"), "{printed}");
}

/// A store URL that is wrong in itself (a scheme no store has, no `//`, an
/// unknown parameter) and a listen address that is no address are bad
/// values: exit 2, the password not shown, nothing bound or written.
#[test]
fn a_bad_store_url_or_listen_address_exits_2() {
    let dir = tempfile::tempdir().expect("a directory");
    let (db, top) = untouched_sqlite(dir.path());
    for url in [
        "foo://x",
        "postgres:ops:hunter22@127.0.0.1/db",
        "redis://:hunter22@127.0.0.1:1/?durable=maybe",
        "redis+sentinel://127.0.0.1:1/m?cacert=/ca.pem",
    ] {
        let (code, printed) = exit_of(dir.path(), &top, &["--store", url]);
        assert_eq!(code, Some(2), "{url}: {printed}");
        assert!(printed.contains("store"), "{url}: {printed}");
        assert!(!printed.contains("hunter22"), "{url}: {printed}");
    }
    for listen in ["nonsense", "127.0.0.1:99999"] {
        let (code, printed) = exit_of(dir.path(), &top, &["--listen", listen]);
        assert_eq!(code, Some(2), "{listen}: {printed}");
        assert!(printed.contains("not an address"), "{listen}: {printed}");
        assert!(!db.exists(), "{listen}: the store was touched");
    }
}

/// A server with no tag at all (none stored, none configured, not the
/// zero-configuration store) starts, and says that it will serve no segment.
#[test]
fn a_server_without_any_tag_says_so() {
    let dir = tempfile::tempdir().expect("a directory");
    let config = format!(
        "store = \"{}\"\nlisten = \"127.0.0.1:{}\"\n[snowflake]\nenabled = false\n",
        common::sqlite(dir.path()),
        workerid_testkit::free_port()
    );
    let (mut child, log) = spawn_logged(dir.path(), &config, &[]);
    let started = Instant::now();
    let printed = loop {
        let printed = std::fs::read_to_string(&log).unwrap_or_default();
        if printed.contains("listening on") || started.elapsed() > Duration::from_secs(20) {
            break printed;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(printed.contains("listening on"), "{printed}");
    assert!(printed.contains("no tag: the store has none"), "{printed}");
}

/// A pool that contradicts the one the namespace was first used with is
/// refused at start (exit 2), rather than joined again and again.
#[test]
fn a_pool_the_namespace_contradicts_exits_2() {
    let dir = tempfile::tempdir().expect("a directory");
    let first = common::Server::start(dir.path());
    assert!(first.terminate().success());
    let top = format!(
        "store = \"{}\"\nlisten = \"127.0.0.1:{}\"\n",
        common::sqlite(dir.path()),
        workerid_testkit::free_port()
    );
    let (code, printed) = exit_of(dir.path(), &top, &["--snowflake-max-worker-id", "7"]);
    assert_eq!(code, Some(2), "{printed}");
    assert!(
        printed.contains("snowflake.max_worker_id 7 contradicts") && printed.contains("0..=1023"),
        "{printed}"
    );
}
