//! Connection limits over real sockets: idle keep-alive connections close,
//! open connections are capped, buffered bytes are bounded, and the fast
//! path can be switched off.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{read_responses, sqlite, Launch, Server};

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
