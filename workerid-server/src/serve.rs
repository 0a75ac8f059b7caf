//! Serving connections: each starts on the `/alloc` fast path
//! ([`crate::fast_path`]); the first request it does not answer hands the
//! connection to hyper's HTTP/1.1 and the router for the rest of its life.
//!
//! `/alloc` is the service's hot path (go-id-alloc's clients call it once per
//! ID): it skips hyper, the router's matching, extractors and boxed body.
//! Requests a client pipelines are answered in one write on the fast path.
//! hyper writes each answer as it is made: its `pipeline_flush` holds
//! answers while pipelined requests keep coming, without a bound, so a
//! client that sends and never reads would grow them until memory runs out.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::Request;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt;

use crate::fast_path::{self, Ended};
use crate::guarded::Guarded;
use crate::rewind::Rewind;
use crate::routes::{self, App};

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long shutdown waits for requests in flight before it closes their
/// connections anyway.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Whether `/alloc` is answered on the fast path.
    pub fast_path: bool,
    /// How long a keep-alive connection may sit idle.
    pub idle_timeout: Duration,
    /// The most connections open at once.
    pub max_open_connections: usize,
    /// The most bytes buffered per connection.
    pub max_buffer_bytes: usize,
}

/// Serves `app` on `listener` until `shutdown` completes, then stops
/// accepting, lets requests in flight finish (for up to ten seconds) and
/// returns.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let router = routes::router(app.clone());
    let mut http = hyper::server::conn::http1::Builder::new();
    // hyper's header read timeout also runs while a keep-alive connection
    // waits for its next request: it is the idle timeout there too.
    let header_timeout = HEADER_READ_TIMEOUT.min(limits.idle_timeout);
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(limits.max_buffer_bytes);
    // A permit per open connection: at the cap, accepting waits (the
    // kernel's backlog holds new connections) until one closes.
    let open = Arc::new(Semaphore::new(limits.max_open_connections));
    // Every connection task holds a watcher from its start, on the fast
    // path too, so `graceful.shutdown()` waits for all of them.
    let graceful = GracefulShutdown::new();
    // Tells the connections still on the fast path to finish.
    let stop_fast_paths = watch::Sender::new(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
        // A client that stops reading its answers is closed after the idle
        // timeout, like one that stops sending; the slot goes with it.
        let stream = Guarded::new(stream, limits.idle_timeout, Some(permit));
        let (app, router, http) = (app.clone(), router.clone(), http.clone());
        let (watcher, stop) = (graceful.watcher(), stop_fast_paths.subscribe());
        tokio::spawn(async move {
            let (unread, stream) = if limits.fast_path {
                match fast_path::serve(stream, &app, stop, header_timeout, &limits).await {
                    Ended::HandOver { unread, stream } => (unread, stream),
                    Ended::Closed => return,
                }
            } else {
                (Bytes::new(), stream)
            };
            let service =
                service_fn(move |request: Request<Incoming>| router.clone().oneshot(request));
            let io = TokioIo::new(Rewind::new(unread, stream));
            if let Err(e) = watcher.watch(http.serve_connection(io, service)).await {
                tracing::debug!("connection: {e}");
            }
        });
    }
    drop(listener);
    stop_fast_paths.send_replace(true);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {DRAIN_TIMEOUT:?}: closing them");
    }
}
