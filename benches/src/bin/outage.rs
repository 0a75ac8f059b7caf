//! How `workerid-server` answers while its store is away, measured over
//! HTTP against a real PostgreSQL: a tag with nothing in memory, the
//! database frozen (SIGSTOP: requests hang until the store timeout) and then
//! stopped (connections refused). For each: the first request (it pays the
//! store timeout, or the refusal), the requests after it (goal: under 10 ms,
//! answered without a store call while the store is probed), and how soon
//! after the database is back the tag is served again (goal: within one
//! probe interval, 200 ms).
//!
//! `cargo run -p benches --release --bin outage` (the server program:
//! `WORKERID_SERVER_BIN`, else built in this profile, as the fault suite
//! builds it).

use std::time::{Duration, Instant};

use benches::record::{record_transcript, say};
use workerid_faults::http::HttpClient;
use workerid_faults::service::server_binary;
use workerid_testkit::postgres::PostgresServer;
use workerid_testkit::{free_port, ServerProcess, ServerSpec};

/// Requests measured after the first one of an outage.
const REQUESTS: usize = 500;
/// The server's store timeout.
const STORE_TIMEOUT_MS: u64 = 1_000;

fn main() {
    let bin = server_binary().expect("the workerid-server program");
    let postgres = PostgresServer::start();
    let port = free_port();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("server.toml");
    let tags: String = ["frozen", "stopped"]
        .iter()
        .map(|t| format!("[[tags]]\nname = \"{t}\"\nfirst_id = 1\nstep = 1000\n"))
        .collect();
    std::fs::write(&config, tags).expect("the config file");
    let pairs = [
        ("--config", config.display().to_string()),
        ("--store", postgres.url()),
        ("--listen", format!("127.0.0.1:{port}")),
        ("--workers", "1".to_string()),
        ("--store-timeout-ms", STORE_TIMEOUT_MS.to_string()),
        ("--snowflake-enabled", "false".to_string()),
    ];
    let server = ServerProcess::launch("workerid-server", move |_| {
        ServerSpec::new(bin)
            .arg_pairs(&pairs)
            .ready(move || status(port, "/livez") == Some(200))
    });
    say(format!(
        "workerid-server on PostgreSQL, store timeout {STORE_TIMEOUT_MS} ms; a tag with nothing in memory"
    ));
    say("");
    say("| outage | first request | next requests p50 / p99 / max (goal < 10 ms) | served again after the database is back (goal < 200 ms) |");
    say("| --- | --- | --- | --- |");
    let pg = postgres.process();
    outage(
        port,
        "frozen",
        "frozen (SIGSTOP)",
        || pg.pause(),
        || pg.resume(),
    );
    outage(
        port,
        "stopped",
        "stopped (refused)",
        || pg.stop(),
        || pg.start(),
    );
    drop(server);
    let command = "cargo run -p benches --release --bin outage";
    if let Some(path) = record_transcript("outage", command) {
        println!("recorded in {}", path.display());
    }
}

/// One outage of the database between `begin` and `end`, measured on `tag`.
fn outage(port: u16, tag: &str, name: &str, begin: impl Fn(), end: impl Fn()) {
    let path = format!("/alloc?biz_tag={tag}");
    begin();
    let (first, first_status) = timed(port, &path);
    let mut next: Vec<Duration> = (0..REQUESTS)
        .map(|i| {
            let (took, status) = timed(port, &path);
            assert_eq!(
                status, 500,
                "{name}: request {i} during the outage was served (the first: {first_status})"
            );
            took
        })
        .collect();
    next.sort();
    end();
    let back = Instant::now();
    let served = loop {
        let (_, status) = timed(port, &path);
        if status == 200 {
            break back.elapsed();
        }
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "never served again"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    let at = |q: f64| next[((next.len() - 1) as f64 * q) as usize];
    say(format!(
        "| {name} | {} ({first_status}) | {} / {} / {} | {} |",
        ms(first),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(next[next.len() - 1]),
        ms(served)
    ));
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// How long a request took, and its status (0: no answer).
fn timed(port: u16, path: &str) -> (Duration, u16) {
    let began = Instant::now();
    let answered = status(port, path).unwrap_or(0);
    (began.elapsed(), answered)
}

/// The status of `GET path` on a connection of its own.
fn status(port: u16, path: &str) -> Option<u16> {
    let answer = HttpClient::new(port, Duration::from_secs(10))
        .get(path)
        .ok()?;
    Some(answer.status)
}
