//! The real binary without a store, or with one it cannot use: help, decode,
//! and the exit codes of bad URLs and unreachable stores.

mod support;

use support::workerid;
use workerid::snowflake::Layout;

#[test]
fn every_command_has_help_with_examples_and_exit_codes() {
    for command in [
        vec![],
        vec!["leases"],
        vec!["namespaces"],
        vec!["release"],
        vec!["decode"],
        vec!["segments"],
        vec!["segments", "create"],
        vec!["segments", "show"],
        vec!["bench"],
        vec!["completions"],
    ] {
        let mut args = command.clone();
        args.push("--help");
        let run = workerid(&args).expect(0);
        assert!(run.stdout.contains("Example"), "{command:?}: {run:#?}");
        assert!(run.stdout.contains("Exit codes"), "{command:?}: {run:#?}");
    }
}

#[test]
fn completions_name_every_command_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = workerid(&["completions", shell]).expect(0);
        for command in [
            "leases",
            "namespaces",
            "release",
            "decode",
            "segments",
            "bench",
        ] {
            assert!(run.stdout.contains(command), "{shell}: no {command}");
        }
    }
    workerid(&["completions", "tcsh"]).expect(2);
}

#[test]
fn usage_errors_exit_2() {
    workerid(&[]).expect(2);
    workerid(&["leases"]).expect(2); // no --store, no --namespace
    workerid(&["frobnicate"]).expect(2);
    workerid(&[
        "release",
        "-s",
        "redis://127.0.0.1:1/",
        "-n",
        "x",
        "--id",
        "-1",
    ])
    .expect(2);
    workerid(&["segments"]).expect(2); // no --store
}

#[test]
fn decode_takes_an_id_apart() {
    let layout = Layout::classic();
    // 2026-01-01T00:00:00.123Z on worker 17, sequence 5.
    let timestamp = 1_767_225_600_123 - 1_704_067_200_000;
    let id = layout.compose(timestamp, 17, 5);
    let run = workerid(&["decode", &id.to_string(), "--json"]).expect(0);
    let json = run.json();
    assert_eq!(json["time_utc"], "2026-01-01T00:00:00.123Z");
    assert_eq!(json["unix_ms"], 1_767_225_600_123u64);
    assert_eq!(
        (json["worker_id"].as_u64(), json["sequence"].as_u64()),
        (Some(17), Some(5))
    );

    let hex = format!("{id:#x}");
    let run = workerid(&["decode", &hex]).expect(0);
    assert!(
        run.stdout.contains("time       2026-01-01T00:00:00.123Z"),
        "{run:#?}"
    );
    assert!(run.stdout.contains("worker     17\n"), "{run:#?}");

    let sonyflake = Layout::sonyflake();
    let id = sonyflake.compose(1_000, 65_535, 255);
    let run = workerid(&["decode", &id.to_string(), "--layout", "sonyflake", "--json"]).expect(0);
    let json = run.json();
    assert_eq!(json["time_utc"], "2014-09-01T00:00:10.000Z");
    assert_eq!(
        (json["worker_id"].as_u64(), json["sequence"].as_u64()),
        (Some(65_535), Some(255))
    );

    let custom = "custom:41,10,12,1,2020-01-01";
    let run = workerid(&["decode", "4194304", "--layout", custom, "--json"]).expect(0);
    assert_eq!(run.json()["time_utc"], "2020-01-01T00:00:00.001Z");

    workerid(&["decode", "not-an-id"]).expect(2);
    workerid(&["decode", &u64::MAX.to_string()]).expect(2); // wider than 63 bits
    workerid(&["decode", "1", "--layout", "custom:99,1,1,1,2020-01-01"]).expect(2);
    workerid(&["decode", "1", "--layout", "nope"]).expect(2);
}

#[test]
fn bad_urls_exit_2() {
    for url in ["ftp://host/", "localhost:6379", "memory://", "redis://[::1"] {
        let run = workerid(&["leases", "--store", url, "--namespace", "x"]).expect(2);
        assert!(run.stderr.contains(" URL "), "{url}: {run:#?}");
    }
}

#[test]
fn unreachable_stores_exit_3_and_hide_passwords() {
    let port = workerid_testkit::free_port().to_string();
    for url in [
        format!("redis://127.0.0.1:{port}/"),
        format!("postgres://me:secret@127.0.0.1:{port}/db"),
    ] {
        let run = workerid(&["leases", "--store", &url, "--namespace", "x"]).expect(3);
        assert!(run.stderr.contains("cannot reach the "), "{run:#?}");
        assert!(!run.stderr.contains("secret"), "{run:#?}");
    }
    let run = workerid(&["segments", "--store", "sqlite:///nonexistent/ids.db"]).expect(3);
    assert!(run.stderr.contains("no SQLite database file"), "{run:#?}");
}

/// `--timeout` bounds the wait for a store that accepts connections and
/// never answers; a bad value is bad usage, before any I/O.
#[test]
fn the_timeout_bounds_the_wait_for_a_silent_store() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/", silent.local_addr().unwrap());
    for (args, wait) in [
        (
            vec!["--timeout", "300ms"],
            std::time::Duration::from_millis(300),
        ),
        (vec!["--timeout=1"], std::time::Duration::from_secs(1)),
    ] {
        let started = std::time::Instant::now();
        let mut command = vec!["leases", "--store", &url, "-n", "x"];
        command.extend(&args);
        let run = workerid(&command).expect(3);
        let took = started.elapsed();
        assert!(
            took >= wait && took < wait + std::time::Duration::from_secs(2),
            "{args:?}: answered after {took:?}: {run:#?}"
        );
    }
    // Also from the environment, and before or after a subcommand.
    let started = std::time::Instant::now();
    let run = support::workerid_with_env(
        &["namespaces", "--store", &url],
        &[("WORKERID_TIMEOUT", "200ms")],
    )
    .expect(3);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{run:#?}"
    );
    for command in [
        ["namespaces", "--timeout", "200ms", "remove", "x", "--force"],
        ["namespaces", "remove", "x", "--force", "--timeout", "200ms"],
    ] {
        let started = std::time::Instant::now();
        let mut command = command.to_vec();
        command.extend(["--store", &url]);
        let run = workerid(&command).expect(3);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{command:?}: {run:#?}"
        );
    }
    for bad in ["0", "3h", "fast", "61m"] {
        let run = workerid(&["segments", "--store", &url, "--timeout", bad]).expect(2);
        assert!(run.stderr.contains("--timeout"), "{bad}: {run:#?}");
    }
}

#[test]
fn an_etcd_url_without_endpoints_is_bad_usage() {
    let run = workerid(&["leases", "--store", "etcd:///prefix", "-n", "x"]).expect(2);
    assert!(run.stderr.contains("no host"), "{run:#?}");
}

#[test]
fn a_forced_release_needs_force_before_anything_else() {
    // Refused before any I/O: the store need not even exist.
    let run = workerid(&[
        "release",
        "-s",
        "redis://127.0.0.1:1/",
        "-n",
        "x",
        "--id",
        "3",
    ])
    .expect(5);
    assert!(run.stderr.contains("without --force"), "{run:#?}");
}

#[test]
fn a_password_in_the_environment_never_shows() {
    let url = "postgres://ops:secretpw@127.0.0.1:1/db";
    for args in [
        vec!["leases", "--help"],
        vec!["segments", "--help"],
        vec!["bench", "--help"],
        vec!["leases", "-n", "x"],
        vec!["--json", "leases", "-n", "x"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_workerid"))
            .args(&args)
            .env("WORKERID_STORE", url)
            .output()
            .expect("run the workerid binary");
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!shown.contains("secretpw"), "{args:?}: {shown}");
    }
}

/// A URL given where clap expects none (without `--store`) is quoted in
/// clap's usage error: without its password, and as JSON with `--json`.
#[test]
fn a_password_in_a_misplaced_url_never_shows() {
    for args in [
        vec!["leases", "redis://:S3cretPw@h:6379/", "-n", "x"],
        vec!["segments", "postgres://ops:S3cretPw@db/ids"],
        vec!["--json", "segments", "postgres://ops:S3cretPw@db/ids"],
    ] {
        let run = workerid(&args).expect(2);
        let shown = format!("{}{}", run.stdout, run.stderr);
        assert!(!shown.contains("S3cretPw"), "{args:?}: {shown}");
        assert!(shown.contains("***"), "{args:?}: {shown}");
        if args[0] == "--json" {
            assert_eq!(run.json()["error"]["kind"], "usage", "{run:#?}");
        }
    }
    let run = workerid(&["--json", "leases"]).expect(2);
    assert_eq!(run.json()["error"]["exit_code"], 2, "{run:#?}");
}

#[test]
fn json_errors_are_json() {
    let run = workerid(&["--json", "leases", "--store", "ftp://h/", "-n", "x"]).expect(2);
    let error = &run.json()["error"];
    assert_eq!(error["kind"], "usage", "{run:#?}");
    assert_eq!(error["exit_code"], 2, "{run:#?}");
    assert!(
        error["message"].as_str().unwrap_or("").contains("ftp://h/"),
        "{run:#?}"
    );
    let port = workerid_testkit::free_port().to_string();
    let url = format!("redis://127.0.0.1:{port}/");
    let run = workerid(&["--json", "leases", "--store", &url, "-n", "x"]).expect(3);
    assert_eq!(run.json()["error"]["kind"], "unreachable", "{run:#?}");
}

#[test]
fn the_help_lists_every_store_url_form() {
    let run = workerid(&["--help"]).expect(0);
    for form in [
        "redis://",
        "rediss://",
        "redis+cluster://",
        "etcd://",
        "etcds://",
        "postgres://",
        "mysql://",
        "sqlite://",
    ] {
        assert!(run.stdout.contains(form), "{form}: {run:#?}");
    }
    assert!(!run.stdout.contains("memory://"), "{run:#?}");
}
