//! The real `workerid-server` binary, driven over HTTP: go-id-alloc's and
//! Leaf's APIs, metrics, bad configuration, and a graceful restart that burns
//! no ID and releases the worker ID.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{read_responses, Server};

#[test]
fn go_id_alloc_and_leaf_apis_and_a_graceful_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());

    assert_eq!(
        server.get("/alloc?biz_tag=test"),
        (200, r#"{"errno":0,"msg":"success","id":1}"#.into())
    );
    assert_eq!(
        server.get("/alloc?biz_tag=test"),
        (200, r#"{"errno":0,"msg":"success","id":2}"#.into())
    );
    // A tag nobody asked for yet is loaded by the health check: a balancer
    // that checks a fresh node puts it in.
    assert_eq!(
        server.get("/health?biz_tag=orders"),
        (200, r#"{"errno":0,"msg":"success","left":1000}"#.into())
    );
    assert_eq!(
        server.get("/alloc?biz_tag=orders").1,
        r#"{"errno":0,"msg":"success","id":5000}"#
    );
    assert_eq!(
        server.get("/health?biz_tag=test").1,
        r#"{"errno":0,"msg":"success","left":98}"#
    );
    // Errors as go-id-alloc sends them: HTTP 500, errno set, the field its
    // clients read (0), and the stable code after it.
    assert_eq!(
        server.get("/alloc"),
        (
            500,
            r#"{"errno":1,"msg":"missing parameter biz_tag","id":0,"code":"missing_tag"}"#.into()
        )
    );
    assert_eq!(
        server.get("/alloc?biz_tag=nope"),
        (
            500,
            r#"{"errno":2,"msg":"unknown tag \"nope\"","id":0,"code":"unknown_tag"}"#.into()
        )
    );
    assert_eq!(
        server.get("/health?biz_tag=nope"),
        (
            500,
            r#"{"errno":2,"msg":"unknown tag \"nope\"","left":0,"code":"unknown_tag"}"#.into()
        )
    );
    assert_eq!(server.get("/api/segment/get/test"), (200, "3".into()));
    assert_eq!(
        server.get("/api/segment/get/nope"),
        (500, "unknown_tag: unknown tag \"nope\"".into())
    );
    let (status, snowflake) = server.get("/api/snowflake/get/anything");
    assert_eq!(status, 200);
    let first_snowflake: u64 = snowflake.parse().unwrap();
    let (_, metrics) = server.get("/metrics");
    for line in [
        "workerid_ids_served_total{kind=\"segment\"} 4",
        "workerid_ids_served_total{kind=\"snowflake\"} 1",
        "workerid_lease_ready 1",
    ] {
        assert!(metrics.contains(line), "metrics lack {line:?}:\n{metrics}");
    }
    let stalls = server.metric("workerid_segment_stalls_total");
    assert!(
        stalls >= 1,
        "the first call of a tag waits for its first segment"
    );

    assert!(server.terminate().success(), "SIGTERM is a clean exit");
    // Back on one thread (a current-thread runtime).
    let server = Server::start_with(dir.path(), &["--workers", "1"]);
    assert_eq!(
        server.get("/alloc?biz_tag=test").1,
        r#"{"errno":0,"msg":"success","id":4}"#,
        "the unused tail was given back: no ID burnt across the restart"
    );
    let next: u64 = server.get("/api/snowflake/get/x").1.parse().unwrap();
    assert!(
        next > first_snowflake,
        "snowflake IDs rise across the restart"
    );
    assert!(server.terminate().success());
}

#[test]
fn bad_arguments_and_configs_exit_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "stor = \"typo\"\n").unwrap();
    for args in [
        vec!["--config", bad.to_str().unwrap()],
        vec!["--frobnicate"],
        vec!["--config"],
        vec!["--workers", "0"],
        vec!["--workers", "many"],
        vec!["--max-batch", "0"],
        vec!["--max-batch", "1000001"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_workerid-server"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
    let periods = dir.path().join("periods.toml");
    std::fs::write(
        &periods,
        "[snowflake]\nttl_secs = 3\nrenew_every_ms = 1000\nrenew_timeout_ms = 1000\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_workerid-server"))
        .args(["--config", periods.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("renew_timeout_ms"), "{said}");
    let config = dir.path().join("tag.toml");
    std::fs::write(
        &config,
        format!(
            "store = \"{}\"\n[[tags]]\nname = \"bad tag\"\n",
            workerid_testkit::sqlite_url(&dir.path().join("x.db"))
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_workerid-server"))
        .args(["--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    // A bad tag is a configuration error like any other: exit 2, before
    // the store is touched.
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad tag"));
    assert!(!dir.path().join("x.db").exists());
}

#[test]
fn serves_segment_and_snowflake_ids_from_etcd() {
    let endpoints = workerid_testkit::etcd::shared_endpoints();
    let hosts: Vec<&str> = endpoints
        .iter()
        .map(|e| e.trim_start_matches("http://"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    // A key prefix of its own, so that reruns against a shared etcd start afresh.
    let prefix = format!("http-test-{}", std::process::id());
    let store = format!("etcd://{}/{prefix}", hosts.join(","));
    let server = Server::start_on(dir.path(), &store, &[]);
    let (status, first) = server.get("/alloc?biz_tag=test");
    assert_eq!(status, 200, "{first}");
    assert_eq!(first, r#"{"errno":0,"msg":"success","id":1}"#);
    let (status, second) = server.get("/api/segment/get/test");
    assert_eq!((status, second.as_str()), (200, "2"));
    let (status, snowflake) = server.get("/api/snowflake/get/any");
    assert_eq!(status, 200, "{snowflake}");
    assert!(snowflake.parse::<u64>().is_ok(), "{snowflake}");
    assert!(server.terminate().success());
}

#[test]
fn pipelined_requests_are_answered_in_order_and_idle_connections_do_not_hold_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut stream = connect(&server);
    // 300 requests in one write: go-id-alloc's hot path, answered before the
    // router, mixed with routes the router answers.
    let mut requests = String::new();
    for i in 0..300 {
        let path = match i % 3 {
            0 | 1 => "/alloc?biz_tag=test",
            _ => "/api/segment/get/test",
        };
        requests.push_str(&format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    }
    stream.write_all(requests.as_bytes()).unwrap();
    let responses = read_responses(&mut stream, 300);
    let mut ids = Vec::new();
    for (i, (head, body)) in responses.iter().enumerate() {
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let id: u64 = if i % 3 == 2 {
            body.parse().unwrap()
        } else {
            assert!(
                head.to_ascii_lowercase()
                    .contains("content-type: application/json"),
                "{head}"
            );
            alloc_id(body)
        };
        ids.push(id);
    }
    assert_eq!(
        ids,
        (1..=300).collect::<Vec<u64>>(),
        "answered in order, one ID each, none twice"
    );

    // The connection stays open and idle: SIGTERM still ends the server
    // promptly (an idle keep-alive connection is closed, not waited for).
    let (_, health) = server.get("/health?biz_tag=test");
    assert!(health.starts_with(r#"{"errno":0,"#), "{health}");
    terminates_promptly_closing(server, &mut stream);
}

/// SIGTERM ends `server` promptly although `idle` is open, and closes it.
fn terminates_promptly_closing(server: Server, idle: &mut TcpStream) {
    let started = Instant::now();
    assert!(server.terminate().success());
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "an idle connection held shutdown for {:?}",
        started.elapsed()
    );
    let mut rest = Vec::new();
    assert_eq!(
        idle.read_to_end(&mut rest).unwrap(),
        0,
        "the idle connection was closed"
    );
}

/// The ID in go-id-alloc's success body.
fn alloc_id(body: &str) -> u64 {
    body.strip_prefix(r#"{"errno":0,"msg":"success","id":"#)
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or_else(|| panic!("{body}"))
        .parse()
        .unwrap()
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

#[test]
fn the_alloc_fast_path_speaks_http_and_hands_the_rest_to_hyper() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let alloc = "GET /alloc?biz_tag=test HTTP/1.1\r\nHost: localhost\r\n\r\n";

    // Fifty in one write, answered in order, framed as hyper frames them.
    let mut idle = connect(&server);
    idle.write_all(alloc.repeat(50).as_bytes()).unwrap();
    let mut last = 0;
    for (head, body) in read_responses(&mut idle, 50) {
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
        assert!(
            head.contains("\r\ncontent-type: application/json"),
            "{head}"
        );
        assert!(head.contains("\r\ndate: "), "{head}");
        assert!(!head.contains("connection: close"), "{head}");
        let id = alloc_id(&body);
        assert!(id > last, "in order: {id} after {last}");
        last = id;
    }

    // A head that arrives in pieces is answered once whole.
    let mut slow = connect(&server);
    let (first, second) = alloc.split_at(20);
    slow.write_all(first.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    slow.write_all(second.as_bytes()).unwrap();
    let (_, body) = read_responses(&mut slow, 1).remove(0);
    assert_eq!(alloc_id(&body), last + 1);

    // The same errors as through the router.
    slow.write_all(b"GET /alloc?biz_tag=nope HTTP/1.1\r\n\r\nGET /alloc HTTP/1.1\r\n\r\n")
        .unwrap();
    let answers = read_responses(&mut slow, 2);
    assert!(
        answers[0].1.starts_with(r#"{"errno":2,"#),
        "{}",
        answers[0].1
    );
    assert!(answers[0].1.contains("nope"), "{}", answers[0].1);
    assert_eq!(
        answers[1].1,
        r#"{"errno":1,"msg":"missing parameter biz_tag","id":0,"code":"missing_tag"}"#
    );

    // `Connection: close`: answered, then closed.
    let mut closing = connect(&server);
    closing
        .write_all(b"GET /alloc?biz_tag=test HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (head, body) = read_responses(&mut closing, 1).remove(0);
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    assert_eq!(alloc_id(&body), last + 2);
    let mut rest = Vec::new();
    assert_eq!(closing.read_to_end(&mut rest).unwrap(), 0, "closed");

    // A body (which /alloc never has) and HTTP/1.0 go to hyper, with what
    // was read already: every request is answered, in order.
    let mut handed = connect(&server);
    let mixed = format!(
        "{alloc}GET /alloc?biz_tag=test HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc{alloc}\
         GET /health?biz_tag=test HTTP/1.1\r\n\r\n{alloc}"
    );
    handed.write_all(mixed.as_bytes()).unwrap();
    let answers = read_responses(&mut handed, 5);
    let ids: Vec<u64> = [0, 1, 2, 4]
        .iter()
        .map(|&i| alloc_id(&answers[i].1))
        .collect();
    assert_eq!(ids, (last + 3..last + 7).collect::<Vec<_>>());
    assert!(answers[3].1.contains(r#""left":"#), "{}", answers[3].1);
    let mut old = connect(&server);
    old.write_all(b"GET /alloc?biz_tag=test HTTP/1.0\r\n\r\n")
        .unwrap();
    let (head, body) = read_responses(&mut old, 1).remove(0);
    assert!(
        head.starts_with("HTTP/1.0 200"),
        "hyper answers HTTP/1.0: {head}"
    );
    assert_eq!(alloc_id(&body), last + 7);

    // Nonsense gets hyper's answer: the connection closed (or a 4xx).
    let mut bad = connect(&server);
    bad.write_all(b"NONSENSE\r\n\r\n").unwrap();
    let mut answer = String::new();
    bad.read_to_string(&mut answer).unwrap();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
        "{answer}"
    );

    // A connection idle on the fast path does not hold shutdown.
    terminates_promptly_closing(server, &mut idle);
}

/// go-id-alloc's Go server and Leaf's Spring one take any method, and
/// go-id-alloc reads an HTML form's body before the query: their clients'
/// POSTs are served the same. An empty `biz_tag` is a missing one, and a
/// name longer than any tag is not sent back.
#[test]
fn posts_and_forms_are_served_as_go_id_alloc_and_leaf_serve_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let form = "Content-Type: application/x-www-form-urlencoded";
    let ids: Vec<u64> = [
        server.send("POST", "/alloc", &[form], "biz_tag=test"),
        server.send("POST", "/alloc?biz_tag=nope", &[form], "biz_tag=test"),
        server.send("PUT", "/alloc?biz_tag=test", &[], ""),
        server.send("POST", "/alloc?biz_tag=test", &[], "ignored=1"),
    ]
    .into_iter()
    .map(|answer| {
        let (status, body) = answer.unwrap();
        assert_eq!(status, 200, "{body}");
        alloc_id(&body)
    })
    .collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    let (status, body) = server
        .send("POST", "/health", &[form], "biz_tag=test")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        server
            .send("POST", "/api/segment/get/test", &[], "")
            .unwrap(),
        (200, "5".into())
    );
    let (status, snowflake) = server
        .send("POST", "/api/snowflake/get/any", &[], "")
        .unwrap();
    assert_eq!(status, 200, "{snowflake}");
    assert!(snowflake.parse::<u64>().is_ok(), "{snowflake}");

    for missing in [
        "/alloc?biz_tag=",
        "/alloc?biz_tag",
        "/alloc?biz_tag=&biz_tag=test",
    ] {
        let (status, body) = server.get(missing);
        assert_eq!(status, 500, "{missing}");
        assert!(
            body.contains(r#""code":"missing_tag""#),
            "{missing}: {body}"
        );
    }
    let (status, body) = server.send("POST", "/alloc", &[form], "biz_tag=").unwrap();
    assert_eq!(status, 500);
    assert!(body.contains(r#""code":"missing_tag""#), "{body}");

    let long = "x".repeat(5000);
    for path in [
        format!("/alloc?biz_tag={long}"),
        format!("/api/segment/get/{long}"),
    ] {
        let (status, body) = server.get(&path);
        assert_eq!(status, 500, "{body}");
        assert!(body.contains("unknown_tag"), "{body}");
        assert!(
            body.contains("5000 bytes") && !body.contains("xxxx"),
            "{body}"
        );
    }
    // Names that are not UTF-8 (raw in a form, or percent-encoded in
    // Leaf's path) are unknown tags, answered in each endpoint's format.
    let (status, body) = server
        .send("POST", "/alloc", &[form], b"biz_tag=\xff\xfe")
        .unwrap();
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains(r#""errno":2"#) && body.contains("unknown_tag"),
        "{body}"
    );
    let (status, body) = server.get("/api/segment/get/%FF%FE");
    assert_eq!(status, 500, "{body}");
    assert!(body.starts_with("unknown_tag"), "{body}");
    let too_large = format!("biz_tag=test&pad={}", "x".repeat(20_000));
    let (status, _) = server.send("POST", "/alloc", &[form], &too_large).unwrap();
    assert_eq!(status, 413);
}
