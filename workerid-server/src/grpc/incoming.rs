//! The gRPC port's connections, each in a [`Guarded`]: at most as many open
//! at once as the HTTP port allows (past it, accepting waits), a client
//! that stops reading closed after the idle timeout, and one that sends
//! nothing (no handshake, no answer to the keep-alive pings) closed after
//! three keep-alive periods.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;

use crate::guarded::Guarded;

/// The limits of the gRPC port's connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// The most connections open at once.
    pub max_open: usize,
    /// How long a write may make no progress.
    pub write_timeout: Duration,
    /// The interval of the keep-alive pings: a connection that sends no
    /// byte for three of them is closed.
    pub keepalive: Duration,
}

/// Accepts on `listener` in a task of its own, which ends when the stream is
/// dropped (the server stopped).
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
) -> ReceiverStream<io::Result<Guarded>> {
    let (accepted, stream) = mpsc::channel(16);
    let slots = Arc::new(Semaphore::new(limits.max_open));
    let read_timeout = limits.keepalive.saturating_mul(3);
    tokio::spawn(async move {
        loop {
            let slot = tokio::select! {
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => return,
                },
                () = accepted.closed() => return,
            };
            let connection = tokio::select! {
                connection = listener.accept() => connection,
                () = accepted.closed() => return,
            };
            let connection = match connection {
                Ok((connection, _)) => connection,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!("gRPC accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if let Err(e) = connection.set_nodelay(true) {
                tracing::debug!("TCP_NODELAY: {e}");
            }
            let guarded = Guarded::new(connection, limits.write_timeout, Some(slot))
                .read_timeout(read_timeout);
            if accepted.send(Ok(guarded)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(stream)
}
