//! What an operator touches: `--version`, `--help` that never shows a
//! secret, settings from the environment, a bearer token, health
//! endpoints, stable error bodies and plain log lines.

mod common;

use std::process::Command;

use common::{sqlite, Launch, Server};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_workerid-server"))
}

#[test]
fn version_and_help_without_secrets() {
    let out = bin().arg("--version").output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");

    let out = bin()
        .arg("--help")
        .env("WORKERID_STORE", "redis://user:hunter2@db:6379")
        .env("WORKERID_AUTH_TOKEN", "tok-hunter3")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for var in [
        "WORKERID_STORE",
        "WORKERID_LISTEN",
        "WORKERID_IDLE_TIMEOUT_MS",
    ] {
        assert!(help.contains(var), "{var} not in --help:\n{help}");
    }
    assert!(
        !help.contains("hunter2") && !help.contains("hunter3"),
        "{help}"
    );
}

#[test]
fn bearer_tokens_guard_every_endpoint_but_the_probes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path(),
        &sqlite(dir.path()),
        &Launch {
            // Two tokens, as while one is rotated out: either is taken.
            args: &["--auth-token", "s3cret", "--auth-token", "older-s3cret"],
            ..Launch::default()
        },
    );
    let token = ["Authorization: Bearer s3cret"];
    let older = ["Authorization: Bearer older-s3cret"];
    let wrong = ["Authorization: Bearer s3cres"];
    for path in [
        "/alloc?biz_tag=test",
        "/api/segment/get/test",
        "/api/snowflake/get/x",
        "/health?biz_tag=test",
        "/metrics",
    ] {
        assert_eq!(server.try_get(path, &[]).unwrap().0, 401, "{path}");
        assert_eq!(server.try_get(path, &wrong).unwrap().0, 401, "{path}");
        for token in [&token, &older] {
            let (status, body) = server.try_get(path, token).unwrap();
            assert_eq!(status, 200, "{path}: {body}");
        }
    }
    // The scheme's name in any case.
    let lower = ["Authorization: bearer s3cret"];
    assert_eq!(server.try_get("/metrics", &lower).unwrap().0, 200);
    // A kubelet's or a load balancer's probe carries no token.
    for path in ["/livez", "/readyz"] {
        assert_eq!(server.try_get(path, &[]).unwrap().0, 200, "{path}");
    }
    // The refused requests are counted, by route and status.
    let (_, metrics) = server.try_get("/metrics", &token).unwrap();
    for line in [
        "workerid_http_requests_total{endpoint=\"/alloc\",status=\"401\"} 2",
        "workerid_http_requests_total{endpoint=\"/api/segment/get/{key}\",status=\"401\"} 2",
        "workerid_http_requests_total{endpoint=\"/api/segment/get/{key}\",status=\"200\"} 2",
    ] {
        assert!(metrics.contains(line), "no {line:?} in:\n{metrics}");
    }
    // Logs written to a file carry no colour codes.
    assert!(
        !server.log_text().contains('\u{1b}'),
        "{}",
        server.log_text()
    );
    assert!(server.terminate().success());
}

#[test]
fn json_logs_and_settings_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path(),
        &sqlite(dir.path()),
        &Launch {
            args: &["--log-format", "json"],
            env: &[("WORKERID_SNOWFLAKE_ENABLED", "false")],
            ..Launch::default()
        },
    );
    let (status, body) = server.get("/api/snowflake/get/x");
    assert_eq!(
        (status, body.as_str()),
        (500, "not_ready: the snowflake worker is disabled")
    );
    assert_eq!(server.get("/readyz").0, 200, "ready without snowflake");
    assert_eq!(server.get("/livez").0, 200);
    let (status, body) = server.get("/api/segment/get/nope");
    assert_eq!(
        (status, body.as_str()),
        (500, "unknown_tag: unknown tag \"nope\"")
    );
    let log = server.log_text();
    for line in log.lines().filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with('{') && line.ends_with('}'),
            "not a JSON line: {line}"
        );
    }
    assert!(server.terminate().success());
}
