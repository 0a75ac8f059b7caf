//! Keep-alive streams kept open for the etcd leases this process renews.
//!
//! etcd renews a lease over a bidirectional stream. Opening one per renewal
//! costs more than the keep-alive itself, so the stream a keep-alive opened stays open, and the next
//! renewal of that lease sends one message on it. At most [`OPEN_MAX`]
//! streams per store (each one is a goroutine on the server): the leases of
//! a process holding thousands open a stream per renewal, as before.
//!
//! A stream that fails, times out or says the lease is gone is closed; the
//! caller then sends the keep-alive the ordinary way (with retries on other
//! members), which opens a stream afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{LeaseKeepAliveStream, LeaseKeeper};

use crate::lock;

/// The most streams one store keeps open.
const OPEN_MAX: usize = 64;

#[derive(Debug)]
struct Open {
    keeper: LeaseKeeper,
    stream: LeaseKeepAliveStream,
}

/// The open keep-alive streams, by etcd lease.
#[derive(Debug, Default)]
pub(crate) struct KeepAlives {
    open: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<Open>>>>,
}

impl KeepAlives {
    /// Sends one keep-alive for `lease` on its open stream and waits up to
    /// `timeout` for the answer: `Some(alive)`, or None when no stream is
    /// open for it (or another renewal uses it now, or it failed).
    pub async fn send(&self, lease: i64, timeout: Duration) -> Option<bool> {
        let open = lock(&self.open).get(&lease).cloned()?;
        let mut open = open.try_lock_owned().ok()?;
        let answer = tokio::time::timeout(timeout, async {
            open.keeper.keep_alive().await?;
            open.stream.message().await
        })
        .await;
        drop(open);
        match answer {
            Ok(Ok(Some(response))) if response.ttl() > 0 => Some(true),
            Ok(Ok(Some(_))) => {
                self.close(lease);
                Some(false)
            }
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {
                tracing::debug!("etcd keep-alive stream of lease {lease:x} failed; reopening");
                self.close(lease);
                None
            }
        }
    }

    /// Keeps the stream a keep-alive of `lease` opened, if there is room.
    pub fn keep(&self, lease: i64, keeper: LeaseKeeper, stream: LeaseKeepAliveStream) {
        let mut open = lock(&self.open);
        if open.len() < OPEN_MAX || open.contains_key(&lease) {
            let stream = Open { keeper, stream };
            open.insert(lease, Arc::new(tokio::sync::Mutex::new(stream)));
        }
    }

    /// Closes the stream of `lease` (revoked, gone, or broken).
    pub fn close(&self, lease: i64) {
        lock(&self.open).remove(&lease);
    }
}
