//! `GET /alloc` answered straight off the socket; any other request hands
//! the connection to hyper.
//!
//! go-id-alloc's clients call `/alloc` once per ID, so it is the service's
//! hot path. A connection starts here: requests are parsed with `httparse`
//! (no allocation), each `/alloc` is answered with the same body as through
//! hyper ([`routes::alloc`]), and the answers to requests that arrived
//! together go out in one write. The first request that is anything else
//! (another path or method, HTTP/1.0, a body, `Expect`, `Upgrade`, a head
//! `httparse` refuses or one over [`MAX_HEAD`]) hands the connection, once
//! the answers before it are written, with the bytes not yet answered, to
//! hyper for the rest of its life: this path never answers what it does not
//! fully understand. (`fast_path = false`
//! serves everything through hyper; `docs/benchmarks.md` has both rates.)

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::uri::PathAndQuery;
use axum::http::StatusCode;
use bytes::{Buf, BufMut};
use hyper::body::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::auth::BearerTokens;
use crate::guarded::Guarded;
use crate::routes::{self, App};
use crate::serve::Limits;

/// The largest request head this path waits for; a longer one goes to
/// hyper, which has its own limit.
pub const MAX_HEAD: usize = 16 * 1024;

/// Headers `httparse` makes room for; a request with more goes to hyper.
const MAX_HEADERS: usize = 32;

/// The fast path times one request in this many for the latency histogram
/// (every one is counted), the first of each connection included.
const TIME_ONE_IN: u32 = 16;

/// How a connection left this path.
pub enum Ended {
    /// Closed: the client left, an error, a `Connection: close`, the header
    /// read timeout, or shutdown.
    Closed,
    /// A request this path does not answer: hyper serves the connection
    /// from `unread` on.
    HandOver { unread: Bytes, stream: Guarded },
}

/// A request at the front of the buffer.
#[derive(Debug, PartialEq)]
enum Parsed {
    /// `GET /alloc` with no body, `len` bytes long; its target as hyper
    /// reads it (`http`'s parser: the same characters refused, a fragment
    /// dropped).
    Alloc {
        len: usize,
        target: PathAndQuery,
        close: bool,
    },
    /// Not all of the head yet.
    Partial,
    /// Not all of the head yet, and over [`MAX_HEAD`] already.
    TooLong,
    /// Anything else: hyper's.
    Other,
}

/// Classifies the request at the front of `buf`; with `tokens` required, a
/// request without one of them is hyper's (which answers 401).
fn parse(buf: &[u8], tokens: &BearerTokens) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let len = match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => return Parsed::Partial,
        Ok(httparse::Status::Partial) => return Parsed::TooLong,
        Err(_) => return Parsed::Other,
    };
    if request.method != Some("GET") || request.version != Some(1) {
        return Parsed::Other;
    }
    let target = match request.path.map(PathAndQuery::try_from) {
        Some(Ok(target)) if target.path() == "/alloc" => target,
        _ => return Parsed::Other,
    };
    let mut close = false;
    let mut authorization = None;
    for header in request.headers.iter() {
        let name = header.name;
        let is = |known: &str| name.eq_ignore_ascii_case(known);
        if is("content-length") {
            if header.value.trim_ascii() != b"0" {
                return Parsed::Other;
            }
        } else if is("authorization") {
            authorization = Some(header.value);
        } else if is("transfer-encoding") || is("expect") || is("upgrade") {
            return Parsed::Other;
        } else if is("connection") {
            for option in header.value.split(|&b| b == b',') {
                let option = option.trim_ascii();
                if option.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if option.eq_ignore_ascii_case(b"upgrade") {
                    return Parsed::Other;
                }
            }
        }
    }
    if tokens.is_required() && !tokens.accept(authorization) {
        return Parsed::Other;
    }
    Parsed::Alloc { len, target, close }
}

/// The `Date` header's value, formatted once a second.
#[derive(Default)]
struct DateCache {
    second: u64,
    text: String,
}

impl DateCache {
    fn now(&mut self) -> &str {
        let now = SystemTime::now();
        let second = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        if second != self.second || self.text.is_empty() {
            self.second = second;
            self.text = httpdate::fmt_http_date(now);
        }
        &self.text
    }
}

/// Appends an HTTP/1.1 response with a JSON `body` to `out`.
fn write_response(
    out: &mut Vec<u8>,
    status: StatusCode,
    body: &str,
    close: bool,
    date: &mut DateCache,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\ncontent-type: ");
    out.extend_from_slice(routes::JSON.as_bytes());
    out.extend_from_slice(b"\r\ncontent-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    if close {
        out.extend_from_slice(b"\r\nconnection: close");
    }
    out.extend_from_slice(b"\r\ndate: ");
    out.extend_from_slice(date.now().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body.as_bytes());
}

/// Serves `stream` until it closes or a request needs hyper. When
/// `shutdown` turns true, an idle connection closes, and a busy one closes
/// after answering its next request (with `Connection: close`), as hyper
/// does; a request head that takes over `header_timeout` to arrive closes
/// it too, and so does `limits.idle_timeout` without a byte of a next
/// request. At most `limits.max_buffer_bytes` are read ahead, and answers
/// are written out whenever that many are waiting.
pub async fn serve(
    mut stream: Guarded,
    app: &App,
    mut shutdown: watch::Receiver<bool>,
    header_timeout: std::time::Duration,
    limits: &Limits,
) -> Ended {
    let mut buf = bytes::BytesMut::with_capacity(4096);
    let mut out = Vec::with_capacity(4096);
    let mut date = DateCache::default();
    // When the head at the front of `buf` began to arrive.
    let mut head_since: Option<Instant> = None;
    let mut answered: u32 = 0;
    let max_buffer = limits.max_buffer_bytes;
    loop {
        let mut close = false;
        let mut hand_over = false;
        let mut give_up = false;
        // Answers are waiting past the buffer bound: written before more
        // requests are parsed.
        let mut more = false;
        loop {
            if out.len() >= max_buffer {
                more = true;
                break;
            }
            match parse(&buf, &app.auth_tokens) {
                Parsed::Alloc {
                    len,
                    target,
                    close: asked,
                } => {
                    app.metrics
                        .fast_path_requests
                        .fetch_add(1, Ordering::Relaxed);
                    // One request in TIME_ONE_IN is timed for the latency
                    // histogram: two clock reads and a histogram record
                    // cost some 10 % of a pipelined request answered from
                    // memory.
                    answered = answered.wrapping_add(1);
                    let started = (answered % TIME_ONE_IN == 1).then(std::time::Instant::now);
                    let span = crate::telemetry::request_span("/alloc");
                    let (status, body) = routes::alloc(app, target.query())
                        .instrument(span.clone())
                        .await;
                    crate::telemetry::end_request_span(&span, status.as_u16());
                    app.metrics.record_alloc(status.as_u16(), started);
                    close = asked || *shutdown.borrow();
                    write_response(&mut out, status, &body, close, &mut date);
                    buf.advance(len);
                    head_since = None;
                    if close {
                        break;
                    }
                }
                Parsed::Partial => break,
                // A head that has been arriving for half the timeout would
                // get a whole new one from hyper: closed instead.
                Parsed::TooLong
                    if head_since.is_some_and(|since| since.elapsed() > header_timeout / 2) =>
                {
                    give_up = true;
                    break;
                }
                Parsed::TooLong | Parsed::Other => {
                    hand_over = true;
                    break;
                }
            }
        }
        // The answers to every whole request read go out before anything
        // else: before more is read, before hyper takes over, before the
        // connection closes, as hyper answers each request it reads.
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return Ended::Closed;
            }
            out.clear();
        }
        if give_up {
            return Ended::Closed;
        }
        if hand_over {
            return Ended::HandOver {
                unread: buf.freeze(),
                stream,
            };
        }
        if close || (buf.is_empty() && *shutdown.borrow()) {
            // A FIN after the answers, as hyper sends, before the socket
            // closes.
            let _ = stream.shutdown().await;
            return Ended::Closed;
        }
        if more {
            continue;
        }
        if !buf.is_empty() {
            head_since.get_or_insert_with(Instant::now);
        }
        let room = max_buffer.saturating_sub(buf.len());
        if room == 0 {
            return Ended::Closed;
        }
        // Waiting for the rest of a head, or idle for the next one.
        let deadline = match head_since {
            Some(since) => since + header_timeout,
            None => Instant::now() + limits.idle_timeout,
        };
        let idle = buf.is_empty();
        let mut limited = (&mut buf).limit(room);
        tokio::select! {
            read = stream.read_buf(&mut limited) => match read {
                Ok(0) | Err(_) => return Ended::Closed,
                Ok(_) => {}
            },
            // Idle (nothing read of a next request): shutdown closes it.
            changed = shutdown.changed(), if idle => {
                if changed.is_err() || *shutdown.borrow() {
                    let _ = stream.shutdown().await;
                    return Ended::Closed;
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                tracing::debug!("idle, or a request head incomplete, for too long: closing");
                let _ = stream.shutdown().await;
                return Ended::Closed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(len: usize, target: &str, close: bool) -> Parsed {
        let target = PathAndQuery::try_from(target).unwrap();
        Parsed::Alloc { len, target, close }
    }

    #[test]
    fn plain_alloc_requests_are_taken() {
        let one = b"GET /alloc?biz_tag=test HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(
            parse(one, &BearerTokens::default()),
            alloc(one.len(), "/alloc?biz_tag=test", false)
        );
        let mut two = one.to_vec();
        two.extend_from_slice(b"GET /alloc HTTP/1.1\r\n\r\n");
        assert_eq!(
            parse(&two, &BearerTokens::default()),
            alloc(one.len(), "/alloc?biz_tag=test", false)
        );
        let bare = b"GET /alloc HTTP/1.1\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(
            parse(bare, &BearerTokens::default()),
            alloc(bare.len(), "/alloc", false)
        );
        let close = b"GET /alloc?biz_tag=a HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n";
        assert_eq!(
            parse(close, &BearerTokens::default()),
            alloc(close.len(), "/alloc?biz_tag=a", true)
        );
        // Read as hyper reads it: the fragment is not part of the query.
        let fragment = b"GET /alloc?biz_tag=a#f HTTP/1.1\r\n\r\n";
        let Parsed::Alloc { target, .. } = parse(fragment, &BearerTokens::default()) else {
            panic!("not taken")
        };
        assert_eq!(target.query(), Some("biz_tag=a"));
    }

    #[test]
    fn incomplete_heads_wait_for_more() {
        assert_eq!(parse(b"", &BearerTokens::default()), Parsed::Partial);
        assert_eq!(
            parse(
                b"GET /alloc?biz_tag=test HTTP/1.1\r\nHo",
                &BearerTokens::default()
            ),
            Parsed::Partial
        );
        let mut long = b"GET /alloc HTTP/1.1\r\nx: ".to_vec();
        long.resize(MAX_HEAD + 1, b'a');
        assert_eq!(parse(&long, &BearerTokens::default()), Parsed::TooLong);
    }

    #[test]
    fn a_request_without_one_of_the_tokens_goes_to_hyper() {
        let tokens = BearerTokens::new(vec!["new-t0ken".into(), "old-t0ken".into()]);
        for token in ["new-t0ken", "old-t0ken"] {
            let head = format!("GET /alloc HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n");
            assert!(
                matches!(parse(head.as_bytes(), &tokens), Parsed::Alloc { .. }),
                "{token}"
            );
        }
        for head in [
            &b"GET /alloc HTTP/1.1\r\n\r\n"[..],
            b"GET /alloc HTTP/1.1\r\nAuthorization: Bearer other\r\n\r\n",
        ] {
            assert_eq!(parse(head, &tokens), Parsed::Other);
        }
    }

    #[test]
    fn everything_else_goes_to_hyper() {
        for other in [
            &b"GET /health?biz_tag=test HTTP/1.1\r\n\r\n"[..],
            b"GET /allocate HTTP/1.1\r\n\r\n",
            b"POST /alloc HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            b"GET /alloc HTTP/1.0\r\n\r\n",
            b"GET /alloc HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello",
            b"GET /alloc HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET /alloc HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            b"GET /alloc HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n",
            b"GET http://host/alloc HTTP/1.1\r\n\r\n",
            b"GET /alloc?biz_tag=\"x\" HTTP/1.1\r\n\r\n",
            b"GET /alloc HTTP/1.1\r\nbad header\r\n\r\n",
            b"NONSENSE\r\n\r\n",
        ] {
            assert_eq!(
                parse(other, &BearerTokens::default()),
                Parsed::Other,
                "{}",
                String::from_utf8_lossy(other)
            );
        }
        let mut many = b"GET /alloc HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(
            parse(&many, &BearerTokens::default()),
            Parsed::Other,
            "more headers than room"
        );
    }

    #[test]
    fn responses_are_framed() {
        let mut out = Vec::new();
        let mut date = DateCache::default();
        write_response(&mut out, StatusCode::OK, "{}", false, &mut date);
        write_response(&mut out, StatusCode::OK, "[1]", true, &mut date);
        // The date lines checked apart (the second may turn between them).
        let text = String::from_utf8(out).unwrap();
        let text: String = text
            .split_inclusive("\r\n")
            .map(|line| match line.strip_prefix("date: ") {
                Some(date) => {
                    assert!(httpdate::parse_http_date(date.trim_end()).is_ok(), "{date}");
                    "date: D\r\n"
                }
                None => line,
            })
            .collect();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\
             date: D\r\n\r\n{}HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
             content-length: 3\r\nconnection: close\r\ndate: D\r\n\r\n[1]"
        );
    }
}
