//! Connection limits over real sockets: idle keep-alive connections close,
//! open connections are capped, buffered bytes are bounded, and the fast
//! path can be switched off.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{launch_with_grpc, read_responses, sqlite, Launch, Server};

fn server(dir: &std::path::Path, top: &str) -> Server {
    Server::launch(
        dir,
        &sqlite(dir),
        &Launch {
            top,
            tables: "[snowflake]\nenabled = false\n",
            ..Launch::default()
        },
    )
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// How long until the server closes `stream` (reads EOF or a reset).
fn closed_after(stream: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("not closed: {e} after {:?}", started.elapsed()),
    }
    started.elapsed()
}

const ALLOC: &str = "GET /alloc?biz_tag=test HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn idle_keep_alive_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), "idle_timeout_ms = 700");
    // On the fast path, after an answer.
    let mut fast = connect(&server);
    fast.write_all(ALLOC.as_bytes()).unwrap();
    read_responses(&mut fast, 1);
    // Handed to hyper, after an answer.
    let mut hyper = connect(&server);
    hyper
        .write_all(b"GET /health?biz_tag=test HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    read_responses(&mut hyper, 1);
    // Never a byte.
    let mut silent = connect(&server);
    let (fast, hyper, silent) = (
        closed_after(&mut fast),
        closed_after(&mut hyper),
        closed_after(&mut silent),
    );
    println!("idle timeout 700 ms: closed after {fast:?} (fast path), {hyper:?} (hyper), {silent:?} (silent)");
    for waited in [fast, hyper, silent] {
        assert!(waited < Duration::from_secs(10), "{waited:?}");
    }
    assert!(server.terminate().success());
}

#[test]
fn open_connections_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), "max_open_connections = 2");
    let mut first = connect(&server);
    let mut second = connect(&server);
    for stream in [&mut first, &mut second] {
        stream.write_all(ALLOC.as_bytes()).unwrap();
        read_responses(stream, 1);
    }
    // A third waits in the kernel's backlog: no answer while two are open.
    let mut third = connect(&server);
    third.write_all(ALLOC.as_bytes()).unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    let mut byte = [0u8; 1];
    let waited = third.read(&mut byte);
    assert!(
        matches!(&waited, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "the third connection was served over the cap: {waited:?}"
    );
    drop(first);
    third
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = Instant::now();
    let (head, _) = read_responses(&mut third, 1).remove(0);
    println!(
        "the third connection answered {:?} after one closed",
        started.elapsed()
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(server.terminate().success());
}

/// Clients that send requests and never read the answers, on the fast
/// path and on hyper's, are closed once their writes make no progress for
/// the idle timeout: the slots they held serve the next client.
#[test]
fn clients_that_stop_reading_are_closed_and_free_their_slots() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(
        dir.path(),
        "max_open_connections = 2\nidle_timeout_ms = 500",
    );
    let stalled: Vec<_> = [
        "GET /alloc?biz_tag=test&count=1000 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /api/segment/get/test?count=1000 HTTP/1.1\r\nHost: x\r\n\r\n",
    ]
    .into_iter()
    .map(|request| {
        let mut writer = connect(&server);
        // Requests until the server stops reading them; not one answer read.
        std::thread::spawn(move || while writer.write_all(request.as_bytes()).is_ok() {})
    })
    .collect();
    let started = Instant::now();
    let mut third = connect(&server);
    third.write_all(ALLOC.as_bytes()).unwrap();
    let (head, _) = read_responses(&mut third, 1).remove(0);
    println!(
        "with two clients that read nothing, a third was answered after {:?}",
        started.elapsed()
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    for writer in stalled {
        writer.join().unwrap();
    }
    assert!(server.terminate().success());
}

/// The gRPC port keeps to `max_open_connections` too, and closes a
/// connection that sends nothing (no handshake) after three keep-alive
/// periods, so silent connections cannot hold its slots.
#[test]
fn grpc_connections_are_capped_and_silent_ones_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, grpc) = launch_with_grpc(
        dir.path(),
        &Launch {
            top: "max_open_connections = 2\ngrpc_keepalive_ms = 300",
            tables: "[snowflake]\nenabled = false\n",
            ..Launch::default()
        },
    );
    let silent: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", grpc)).unwrap())
        .collect();
    let started = Instant::now();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let decoded = runtime.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{grpc}"))
            .unwrap()
            .timeout(Duration::from_secs(20))
            .connect()
            .await
            .expect("connected once a silent connection is closed");
        workerid_proto::v1::ids_client::IdsClient::new(channel)
            .decode(workerid_proto::v1::DecodeRequest { id: 1 << 22 })
            .await
    });
    let waited = started.elapsed();
    println!("with three silent connections, a gRPC call was answered after {waited:?}");
    assert!(decoded.is_ok(), "{decoded:?}");
    // Two silent connections held both slots until the first was closed,
    // after three keep-alives (900 ms).
    assert!(
        waited >= Duration::from_millis(600),
        "answered over the cap after {waited:?}"
    );
    // Two were accepted and closed; the third was the next accepted.
    for mut connection in silent {
        let closed = closed_after(&mut connection);
        assert!(closed < Duration::from_secs(10), "{closed:?}");
    }
    assert!(server.terminate().success());
}

/// A head that is not HTTP/1.x is answered 400 and closed, after the
/// answers to the requests before it.
#[test]
fn a_head_that_is_not_http_is_answered_400_after_the_requests_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), "");
    for before in [
        "",
        ALLOC,
        "GET /health?biz_tag=test HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let mut stream = connect(&server);
        stream
            .write_all(format!("{before}NOT HTTP AT ALL\r\n\r\n").as_bytes())
            .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let answer = String::from_utf8_lossy(&answer);
        // Status lines: a body is not followed by a line break.
        let heads: Vec<&str> = answer
            .match_indices("HTTP/1.1 ")
            .filter_map(|(at, _)| answer[at..].split("\r\n").next())
            .collect();
        let expected: &[&str] = if before.is_empty() {
            &["HTTP/1.1 400 Bad Request"]
        } else {
            &["HTTP/1.1 200 OK", "HTTP/1.1 400 Bad Request"]
        };
        assert_eq!(heads, expected, "{before:?}: {answer}");
    }
    assert!(server.terminate().success());
}

#[test]
fn buffered_bytes_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), "max_buffer_bytes = 32768");
    // A head that never ends: refused (431) or closed, not buffered.
    let mut endless = connect(&server);
    let mut head = b"GET /alloc?biz_tag=test HTTP/1.1\r\nx: ".to_vec();
    head.resize(256 * 1024, b'a');
    let _ = endless.write_all(&head);
    let mut answer = Vec::new();
    let _ = endless.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer}"
    );

    // 20 000 pipelined requests (about 1 MB) sent before a byte is read:
    // answered in order, written out in bounded batches.
    let mut stream = connect(&server);
    let mut writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        writer.write_all(ALLOC.repeat(20_000).as_bytes()).unwrap();
    });
    std::thread::sleep(Duration::from_millis(500));
    let responses = read_responses(&mut stream, 20_000);
    sending.join().unwrap();
    let first = common_id(&responses[0].1);
    for (i, (_, body)) in responses.iter().enumerate() {
        assert_eq!(common_id(body), first + i as u64);
    }
    assert!(server.terminate().success());
}

#[test]
fn the_fast_path_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let off = server(dir.path(), "fast_path = false");
    let (status, body) = off.get("/alloc?biz_tag=test");
    assert_eq!((status, common_id(&body)), (200, 1));
    assert_eq!(off.metric("workerid_fast_path_requests_total"), 0);
    assert!(off.terminate().success());
    let on = server(dir.path(), "");
    assert_eq!(on.get("/alloc?biz_tag=test").0, 200);
    assert_eq!(on.metric("workerid_fast_path_requests_total"), 1);
    assert!(on.terminate().success());
}

fn common_id(body: &str) -> u64 {
    body.strip_prefix(r#"{"errno":0,"msg":"success","id":"#)
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or_else(|| panic!("{body}"))
        .parse()
        .unwrap()
}
