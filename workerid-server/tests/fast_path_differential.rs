//! The `/alloc` fast path answers exactly as hyper would: the same random
//! and adversarial byte streams (pipelined requests, heads split at random
//! points, Content-Length and Transfer-Encoding mixes, oversize heads, bad
//! methods, HTTP/1.0, `Connection: close`, garbage) go over real sockets to
//! a server with the fast path and to one without, and the answers must be
//! the same: status lines, headers and bodies, once IDs (any digits in a
//! body) and the `Date` and `Content-Length` headers are set aside.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{sqlite, Launch, Server};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Sent after every stream, so that most connections end with an answer
/// and a close rather than a wait for silence.
const LAST: &[u8] = b"GET /alloc?biz_tag=test HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// How long a connection may stay silent before its answers are taken as
/// complete (one that neither answers nor closes: a head still partial).
const QUIET: Duration = Duration::from_millis(300);

fn launch(dir: &std::path::Path, fast_path: bool) -> Server {
    let top = format!("fast_path = {fast_path}\nidle_timeout_ms = 5000");
    let server = Server::launch(
        dir,
        &sqlite(dir),
        &Launch {
            top: &top,
            tables: "[snowflake]\nenabled = false\n",
            ..Launch::default()
        },
    );
    // The first segment is loaded before the streams, not during one.
    for tag in ["test", "orders"] {
        assert_eq!(server.get(&format!("/alloc?biz_tag={tag}")).0, 200);
    }
    server
}

/// Writes `chunks` to a new connection to `port`, a moment apart, then
/// reads until the server closes or stays silent for `quiet`.
fn exchange(port: u16, chunks: &[Vec<u8>], quiet: Duration) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    for chunk in chunks {
        // The server may close early (a bad request): later writes fail.
        if stream.write_all(chunk).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    stream.set_read_timeout(Some(quiet)).expect("read timeout");
    let mut answer = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            // A reset after a bad request: what arrived before it counts.
            Err(_) => break,
        }
    }
    answer
}

/// Digits (IDs, counts left) in a body become `#`.
fn without_digits(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The responses in `bytes`, each as its status line, its headers (sorted,
/// without `date` and `content-length`) and its body without digits.
fn responses(mut bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(head)) = response.parse(bytes) else {
            out.push(format!("unparsed: {}", without_digits(bytes)));
            break;
        };
        let mut length = None;
        let mut kept = Vec::new();
        for h in response.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            let value = String::from_utf8_lossy(h.value).into_owned();
            match name.as_str() {
                "date" => {}
                "content-length" => length = value.trim().parse::<usize>().ok(),
                _ => kept.push(format!("{name}: {value}")),
            }
        }
        kept.sort();
        let rest = &bytes[head..];
        let body_len = length.unwrap_or(rest.len()).min(rest.len());
        out.push(format!(
            "HTTP/1.{} {} {} | {} | {}",
            response.version.unwrap_or(9),
            response.code.unwrap_or(0),
            response.reason.unwrap_or(""),
            kept.join(", "),
            without_digits(&rest[..body_len])
        ));
        bytes = &rest[body_len..];
    }
    out
}

fn bytes(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// One request, well-formed or not.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof![
        16 => Just("GET"),
        1 => Just("POST"),
        1 => Just("HEAD"),
        1 => Just("get"),
        1 => Just("G3T"),
        1 => Just("DELETE"),
    ];
    let target = prop_oneof![
        12 => Just("/alloc?biz_tag=test"),
        1 => Just("/alloc?biz_tag=orders"),
        1 => Just("/alloc?biz_tag=nope"),
        1 => Just("/alloc"),
        1 => Just("/alloc?biz_tag="),
        1 => Just("/alloc?biz_tag=te%73t"),
        1 => Just("/alloc?biz_tag=test#frag"),
        1 => Just("/alloc?biz_tag=test&count=3"),
        1 => Just("/alloc?biz_tag=test&count=2&format=ranges"),
        1 => Just("/alloc?biz_tag=test&count=0"),
        1 => Just("/alloc/"),
        1 => Just("/health?biz_tag=test"),
        1 => Just("/api/segment/get/test"),
        1 => Just("/livez"),
        1 => Just("/nowhere"),
        1 => Just("*"),
        1 => Just("http://x/alloc?biz_tag=test"),
    ];
    let version = prop_oneof![
        16 => Just("HTTP/1.1"),
        2 => Just("HTTP/1.0"),
        1 => Just("HTTP/2.0"),
        1 => Just("HTTP/1.1 "),
        1 => Just("HTTX/1.1"),
    ];
    let header = prop_oneof![
        12 => Just(bytes("Host: x\r\n")),
        2 => Just(bytes("Connection: close\r\n")),
        1 => Just(bytes("Connection: keep-alive\r\n")),
        1 => Just(bytes("Connection: Upgrade\r\nUpgrade: websocket\r\n")),
        3 => Just(bytes("Content-Length: 0\r\n")),
        1 => Just(bytes("Content-Length: 0\r\nContent-Length: 0\r\n")),
        1 => Just(bytes("Content-Length: 0, 0\r\n")),
        1 => Just(bytes("Content-Length: -1\r\n")),
        1 => Just(bytes("Content-Length: abc\r\n")),
        1 => Just(bytes("Transfer-Encoding: chunked\r\n")),
        1 => Just(bytes("Transfer-Encoding: gzip, chunked\r\n")),
        1 => Just(bytes("Transfer-Encoding: identity\r\n")),
        1 => Just(bytes("Expect: 100-continue\r\n")),
        1 => Just(bytes("X-Folded: a\r\n b\r\n")),
        1 => Just(bytes("No-Colon\r\n")),
        1 => Just(bytes(" Leading: space\r\n")),
        1 => Just(bytes("Bare: lf\n")),
        1 => Just(bytes("Authorization: Bearer nothing\r\n")),
        1 => Just(b"X-Bytes: \xff\xfe\r\n".to_vec()),
        1 => (1usize..3).prop_map(|k| format!("X-Long: {}\r\n", "a".repeat(k * 12_000)).into_bytes()),
        1 => Just((0..40).map(|i| format!("X-{i}: v\r\n")).collect::<String>().into_bytes()),
    ];
    // A body for a declared length or chunked encoding, or none.
    let body = prop_oneof![
        16 => Just(Vec::new()),
        1 => Just(bytes("Content-Length: 5\r\n\r\nhello")),
        1 => Just(bytes("Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")),
        1 => Just(bytes("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n")),
        1 => Just(bytes("Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")),
    ];
    (
        method,
        target,
        version,
        prop::collection::vec(header, 0..4),
        body,
    )
        .prop_map(|(method, target, version, headers, body)| {
            let mut out = format!("{method} {target} {version}\r\n").into_bytes();
            for h in headers {
                out.extend_from_slice(&h);
            }
            if body.is_empty() {
                out.extend_from_slice(b"\r\n");
            } else {
                out.extend_from_slice(&body);
            }
            out
        })
}

/// A stream: requests (and now and then garbage) back to back.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        30 => request(),
        1 => prop::collection::vec(any::<u8>(), 1..40),
        1 => Just(bytes("\r\n")),
    ];
    prop::collection::vec(piece, 1..6).prop_map(|pieces| pieces.concat())
}

/// `stream` cut at up to five random points.
fn chunked() -> impl Strategy<Value = Vec<Vec<u8>>> {
    (
        stream(),
        prop::collection::vec(any::<prop::sample::Index>(), 0..5),
    )
        .prop_map(|(mut stream, cuts)| {
            stream.extend_from_slice(LAST);
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len())).collect();
            at.sort_unstable();
            at.dedup();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in at.into_iter().chain([stream.len()]) {
                if cut > from {
                    chunks.push(stream[from..cut].to_vec());
                    from = cut;
                }
            }
            chunks
        })
}

#[test]
fn the_fast_path_answers_as_hyper_does() {
    let (dir_fast, dir_hyper) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let fast = launch(dir_fast.path(), true);
    let hyper = launch(dir_hyper.path(), false);
    let (fast_port, hyper_port) = (fast.port, hyper.port);
    let cases = std::env::var("FAST_PATH_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    });
    let started = Instant::now();
    let both = |chunks: &Vec<Vec<u8>>, quiet: Duration| {
        let to_fast = {
            let chunks = chunks.clone();
            std::thread::spawn(move || exchange(fast_port, &chunks, quiet))
        };
        let through_hyper = responses(&exchange(hyper_port, chunks, quiet));
        let on_fast = responses(&to_fast.join().expect("the fast-path client"));
        (on_fast, through_hyper)
    };
    let outcome = runner.run(&chunked(), |chunks| {
        let (mut on_fast, mut through_hyper) = both(&chunks, QUIET);
        if on_fast != through_hyper {
            // A server that took longer than QUIET on a loaded machine
            // looks like one that did not answer: the same stream again,
            // with time to spare. A real difference stays.
            (on_fast, through_hyper) = both(&chunks, QUIET * 10);
        }
        if std::env::var_os("FAST_PATH_SHOW").is_some() {
            println!(
                "{:?}\n  -> {on_fast:?}",
                String::from_utf8_lossy(&chunks.concat())
            );
        }
        prop_assert_eq!(
            &on_fast,
            &through_hyper,
            "the stream {:?}",
            String::from_utf8_lossy(&chunks.concat())
        );
        Ok(())
    });
    println!("{cases} streams in {:?}", started.elapsed());
    if let Err(e) = outcome {
        panic!(
            "{e}\nfast path's log:\n{}\nhyper's log:\n{}",
            fast.log_text(),
            hyper.log_text()
        );
    }
}
