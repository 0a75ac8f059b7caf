use std::time::Duration;

use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

use super::*;

const TIMEOUT: Duration = Duration::from_millis(200);

#[tokio::test]
async fn a_write_the_peer_never_reads_fails_after_the_timeout() {
    let (ours, _peer) = duplex(1024);
    let mut guarded = Guarded::new(ours, TIMEOUT, None);
    let started = tokio::time::Instant::now();
    let written = guarded.write_all(&[0u8; 64 * 1024]).await;
    let error = written.expect_err("the peer reads nothing");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert!(started.elapsed() >= TIMEOUT, "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_peer_that_reads_slowly_but_steadily_is_served_in_full() {
    let (ours, mut peer) = duplex(1024);
    let mut guarded = Guarded::new(ours, TIMEOUT, None);
    let reader = tokio::spawn(async move {
        let mut got = 0;
        let mut buf = [0u8; 1024];
        loop {
            // Each pause is below the timeout; all of them together are not.
            tokio::time::sleep(TIMEOUT / 4).await;
            match peer.read(&mut buf).await.expect("read") {
                0 => return got,
                n => got += n,
            }
        }
    });
    guarded.write_all(&[0u8; 16 * 1024]).await.expect("written");
    guarded.shutdown().await.expect("shut down");
    assert_eq!(reader.await.expect("reader"), 16 * 1024);
}

#[tokio::test]
async fn a_peer_that_sends_nothing_fails_a_read_only_with_a_read_timeout() {
    let (ours, _peer) = duplex(1024);
    let mut guarded = Guarded::new(ours, TIMEOUT, None).read_timeout(TIMEOUT);
    let error = guarded
        .read(&mut [0u8; 16])
        .await
        .expect_err("nothing comes");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);

    let (ours, mut peer) = duplex(1024);
    let mut patient = Guarded::new(ours, TIMEOUT, None);
    let read = tokio::time::timeout(TIMEOUT * 3, patient.read(&mut [0u8; 16])).await;
    assert!(read.is_err(), "no read timeout: the read waits");
    peer.write_all(b"late").await.expect("write");
    let mut buf = [0u8; 4];
    patient.read_exact(&mut buf).await.expect("read");
    assert_eq!(&buf, b"late");
}

#[tokio::test]
async fn the_slot_is_held_until_the_connection_is_dropped() {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
    let (ours, _peer) = duplex(16);
    let slot = slots.clone().try_acquire_owned().expect("a slot");
    let guarded = Guarded::new(ours, TIMEOUT, Some(slot));
    assert_eq!(slots.available_permits(), 0);
    drop(guarded);
    assert_eq!(slots.available_permits(), 1);
}
