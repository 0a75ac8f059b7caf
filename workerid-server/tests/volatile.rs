//! Segments refuse a store that is not durable: the server exits with an
//! error naming the setting, unless `allow_volatile_segments` (or its
//! environment variable) lets it start, with a warning.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Launch, Server};
use workerid_testkit::StoreKind;

const WARNING: &str = "serving segments from a store that is not durable";

/// Runs the server on `store` with `env` until it exits (it must, within
/// 20 s): its exit code and everything it printed.
fn run_to_exit(store: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_workerid-server"));
    command
        .env("WORKERID_STORE", store)
        .env(
            "WORKERID_LISTEN",
            format!("127.0.0.1:{}", workerid_testkit::free_port()),
        )
        .env("WORKERID_SNOWFLAKE_ENABLED", "false")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("start the server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server did not exit on a volatile store");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn a_volatile_store_is_refused_with_the_setting_to_change() {
    let redis = StoreKind::Redis.shared_url();
    let (code, text) = run_to_exit(&redis, &[]);
    assert_eq!(code, Some(2), "{text}");
    for needed in [
        "not durable",
        "durable=true",
        "allow_volatile_segments = true",
        "WORKERID_ALLOW_VOLATILE_SEGMENTS",
    ] {
        assert!(text.contains(needed), "{needed:?} not in:\n{text}");
    }
    assert!(!text.contains("listening on"), "{text}");

    let (code, text) = run_to_exit("sqlite::memory:", &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("in-memory"), "{text}");

    let (code, text) = run_to_exit(&redis, &[("WORKERID_ALLOW_VOLATILE_SEGMENTS", "false")]);
    assert_eq!(code, Some(2), "an explicit false refuses too:\n{text}");
}

#[test]
fn allow_volatile_segments_starts_with_a_warning() {
    let redis = StoreKind::Redis.shared_url();
    let dir = tempfile::tempdir().unwrap();
    let by_env = Server::launch(
        dir.path(),
        &redis,
        &Launch {
            env: &[("WORKERID_ALLOW_VOLATILE_SEGMENTS", "true")],
            ..Launch::default()
        },
    );
    assert_eq!(by_env.get("/alloc?biz_tag=test").0, 200);
    assert!(by_env.log_text().contains(WARNING), "{}", by_env.log_text());
    drop(by_env);

    let dir = tempfile::tempdir().unwrap();
    let by_config = Server::launch(
        dir.path(),
        &redis,
        &Launch {
            top: "allow_volatile_segments = true",
            ..Launch::default()
        },
    );
    assert_eq!(by_config.get("/alloc?biz_tag=test").0, 200);
    assert!(
        by_config.log_text().contains(WARNING),
        "{}",
        by_config.log_text()
    );
}

#[test]
fn a_durable_store_starts_without_the_warning() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    assert_eq!(server.get("/alloc?biz_tag=test").0, 200);
    assert!(
        !server.log_text().contains(WARNING),
        "{}",
        server.log_text()
    );
}
