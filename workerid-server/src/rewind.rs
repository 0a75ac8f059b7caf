//! A connection with bytes already read from it put back in front, so that
//! hyper can take over a connection the `/alloc` fast path began reading.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner`, whose reads first return `prefix`.
pub struct Rewind<T> {
    prefix: Bytes,
    inner: T,
}

impl<T> Rewind<T> {
    /// `inner` with `prefix` to be read again first.
    pub fn new(prefix: Bytes, inner: T) -> Self {
        Rewind { prefix, inner }
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
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn reads_the_prefix_then_the_rest_and_writes_through() {
        let (ours, mut peer) = tokio::io::duplex(64);
        peer.write_all(b" world").await.unwrap();
        drop(peer.shutdown().await);
        let mut io = Rewind::new(Bytes::from_static(b"hello"), ours);
        let mut small = [0u8; 3];
        io.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"hel");
        let mut all = Vec::new();
        io.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"lo world");
        io.write_all(b"answer").await.unwrap();
        let mut answer = [0u8; 6];
        peer.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"answer");
    }
}
