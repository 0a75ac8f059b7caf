//! A connection with deadlines: a write that makes no progress for the
//! write timeout fails, and (where set) so does a read that waits past the
//! read timeout, so a client that stops reading its answers, or connects
//! and never speaks, cannot hold a connection slot for good. It also holds
//! the connection's slot (a semaphore permit) until it is dropped.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{sleep, Sleep};

/// `inner` with deadlines on its writes and, if set, its reads.
#[derive(Debug)]
pub struct Guarded<S = TcpStream> {
    inner: S,
    write_timeout: Duration,
    read_timeout: Option<Duration>,
    /// Armed while a write waits; disarmed by any progress.
    write_stall: Option<Pin<Box<Sleep>>>,
    /// Armed while a read waits; disarmed by any byte read.
    read_stall: Option<Pin<Box<Sleep>>>,
    _slot: Option<OwnedSemaphorePermit>,
}

impl<S> Guarded<S> {
    /// `inner`, whose writes fail after `write_timeout` without progress,
    /// holding `slot` until dropped.
    pub fn new(inner: S, write_timeout: Duration, slot: Option<OwnedSemaphorePermit>) -> Self {
        Guarded {
            inner,
            write_timeout,
            read_timeout: None,
            write_stall: None,
            read_stall: None,
            _slot: slot,
        }
    }

    /// Reads fail, too, after `timeout` with nothing read.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = Some(timeout);
        self
    }
}

/// Whether the deadline in `stall` (armed for `timeout` if it is not) has
/// passed; `Pending` registers the waker.
fn overdue(stall: &mut Option<Pin<Box<Sleep>>>, timeout: Duration, cx: &mut Context<'_>) -> bool {
    let timer = stall.get_or_insert_with(|| Box::pin(sleep(timeout)));
    timer.as_mut().poll(cx).is_ready()
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("the peer {what}"))
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(done) => {
                this.read_stall = None;
                Poll::Ready(done)
            }
            Poll::Pending => match this.read_timeout {
                Some(timeout) if overdue(&mut this.read_stall, timeout, cx) => {
                    Poll::Ready(Err(timed_out("sent nothing in time")))
                }
                _ => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncWrite + Unpin> Guarded<S> {
    /// A write-side poll under the write deadline.
    fn poll_progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll(Pin::new(&mut self.inner), cx) {
            Poll::Ready(done) => {
                self.write_stall = None;
                Poll::Ready(done)
            }
            Poll::Pending if overdue(&mut self.write_stall, self.write_timeout, cx) => {
                Poll::Ready(Err(timed_out("read nothing in time")))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_progress(cx, |s, cx| s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_progress(cx, |s, cx| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_progress(cx, |s, cx| s.poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_progress(cx, |s, cx| s.poll_shutdown(cx))
    }
}

impl tonic::transport::server::Connected for Guarded<TcpStream> {
    type ConnectInfo = <TcpStream as tonic::transport::server::Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests;
