//! A hung store bounds what it costs: requests fail after the store
//! timeout, and SIGTERM ends the process within seconds.

mod common;

use std::time::{Duration, Instant};

use common::{Launch, Server};
use workerid_testkit::StoreKind;

#[test]
fn a_frozen_store_fails_requests_in_time_and_does_not_hold_sigterm() {
    let redis = StoreKind::Redis.start();
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::launch(
        dir.path(),
        &redis.url(),
        &Launch {
            top: "store_timeout_ms = 1000\nallow_volatile_segments = true",
            tables: "[snowflake]\nttl_secs = 3\n",
            ..Launch::default()
        },
    );
    assert_eq!(server.get("/alloc?biz_tag=test").0, 200);
    assert_eq!(server.get("/api/snowflake/get/x").0, 200);

    let processes = redis.processes();
    for (_, process) in &processes {
        process.pause();
    }
    // `orders` has no segment in memory yet: its first ID needs the store
    // (the store timeout, 1 s, fires before the Redis client's own 3 s).
    let asked = Instant::now();
    let (status, body) = server.get("/api/segment/get/orders");
    let answered = asked.elapsed();
    println!("a request needing the frozen store answered {status} after {answered:?}");
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body, "store_unavailable: store unavailable",
        "no store details"
    );
    assert!(answered < Duration::from_secs(8), "{answered:?}");

    let signalled = Instant::now();
    server.signal_term();
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(20),
            "still running 20 s after SIGTERM:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let exited = signalled.elapsed();
    println!("SIGTERM with the store frozen: exited after {exited:?} ({status})");
    for (_, process) in &processes {
        process.resume();
    }
    assert!(status.success(), "{}", server.log_text());
    assert!(exited < Duration::from_secs(10), "{exited:?}");
}

/// SIGTERM waits up to 10 s for requests in flight; a second signal does
/// not: the server stops at once (exit 1), saying why.
#[test]
fn a_second_signal_stops_the_server_without_waiting_for_the_drain() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    assert_eq!(server.get("/alloc?biz_tag=test").0, 200);
    // Half a request: a connection the drain waits for.
    let mut half = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    std::io::Write::write_all(&mut half, b"GET /alloc?biz_tag=test HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));

    server.signal_term();
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the first SIGTERM waits for the request in flight:\n{}",
        server.log_text()
    );
    let second = Instant::now();
    server.signal_term();
    let status = common::exit_within(&mut server.child, Duration::from_secs(5));
    let stopped = second.elapsed();
    let log = server.log_text();
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{log}");
    assert!(stopped < Duration::from_secs(3), "{stopped:?}: {log}");
    assert!(log.contains("a second signal"), "{log}");
    drop(half);
}
