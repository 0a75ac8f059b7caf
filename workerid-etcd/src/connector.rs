//! The TCP connections to the members, with `TCP_USER_TIMEOUT` set.
//!
//! Without it, a request sent into a partition waits in the kernel's send
//! queue, retransmitted with backoff, until TCP gives the connection up
//! (many minutes), and is delivered when the partition heals: a
//! transaction the store gave up on is applied late, after its sender has
//! moved on. With it, data left unacknowledged for the request timeout ends
//! the connection and drops what it queued (Linux; elsewhere the option
//! does not exist and is not set). The HTTP/2 keep-alive notices a dead
//! member the same way; this also covers a connection with requests in
//! flight.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::transport::Uri;

/// Makes the TCP connection of a member's HTTP/2 channel (TLS, when the
/// endpoint has it, goes on top).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Connector {
    pub user_timeout: Duration,
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let user_timeout = self.user_timeout;
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host in the URL"))?
                .trim_matches(['[', ']']);
            let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
                Some("https") => 443,
                _ => 80,
            });
            let stream = TcpStream::connect((host, port)).await?;
            stream.set_nodelay(true)?;
            #[cfg(target_os = "linux")]
            socket2::SockRef::from(&stream).set_tcp_user_timeout(Some(user_timeout))?;
            #[cfg(not(target_os = "linux"))]
            let _ = user_timeout;
            Ok(TokioIo::new(stream))
        })
    }
}
