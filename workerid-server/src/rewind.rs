//! A connection with bytes already read from it put back in front, so that
//! hyper can take over a connection the `/alloc` fast path began reading,
//! and with the fast path's answers not yet written held in front of
//! hyper's first write.
//!
//! hyper writes pipelined answers only once it has used up the bytes it
//! read; a connection that it closes before then (a request it refuses, a
//! `Connection: close` followed by more bytes) never gets them. The fast
//! path's unwritten answers are answers to requests of that same batch, so
//! they go out with hyper's first write, or not at all, as hyper's own would.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use hyper::body::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner`, whose reads first return `prefix` and whose first write is
/// preceded by `answers`.
pub struct Rewind<T> {
    prefix: Bytes,
    answers: Bytes,
    inner: T,
}

impl<T> Rewind<T> {
    /// `inner` with `prefix` to be read again first, and `answers` to be
    /// written ahead of the first write (dropped if none comes).
    pub fn new(prefix: Bytes, answers: Bytes, inner: T) -> Self {
        Rewind {
            prefix,
            answers,
            inner,
        }
    }
}

impl<T: AsyncWrite + Unpin> Rewind<T> {
    /// Writes what is left of `answers`.
    fn poll_answers(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.answers.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.answers) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.answers.advance(n),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Rewind<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            let head = self.prefix.split_to(n);
            buf.put_slice(&head);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Rewind<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !data.is_empty() {
            std::task::ready!(self.poll_answers(cx))?;
        }
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if bufs.iter().any(|b| !b.is_empty()) {
            std::task::ready!(self.poll_answers(cx))?;
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn reads_the_prefix_then_the_rest() {
        let rest: &[u8] = b" world";
        let mut io = Rewind::new(Bytes::from_static(b"hello"), Bytes::new(), rest);
        let mut small = [0u8; 3];
        io.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"hel");
        let mut all = Vec::new();
        io.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"lo world");
    }

    #[tokio::test]
    async fn answers_go_before_the_first_write_or_not_at_all() {
        use tokio::io::AsyncWriteExt;
        let mut written = Vec::new();
        let mut io = Rewind::new(Bytes::new(), Bytes::from_static(b"first "), &mut written);
        io.write_all(b"second").await.unwrap();
        io.shutdown().await.unwrap();
        assert_eq!(written, b"first second");

        let mut written = Vec::new();
        let mut io = Rewind::new(Bytes::new(), Bytes::from_static(b"first "), &mut written);
        io.flush().await.unwrap();
        io.shutdown().await.unwrap();
        assert!(written.is_empty(), "no write, no answers");
    }
}
