//! The snowflake worker, kept joined by a [`SupervisedWorker`], with the
//! namespace and holder label its leases carry.

use std::time::Duration;

use tokio::sync::watch;
use workerid::snowflake::{NextIdError, SupervisedWorker, SupervisorCounts, WorkerOptions};
use workerid::{Allocator, Holder, Namespace};

/// The snowflake side of the server: the supervised worker.
#[derive(Debug)]
pub struct Snowflake {
    supervised: SupervisedWorker,
    /// Where the worker ID is leased, and the label the lease carries.
    namespace: Namespace,
    holder: Holder,
}

impl Snowflake {
    /// Starts keeping a worker of `allocator` joined, its leases labelled
    /// `holder`.
    pub fn spawn(allocator: Allocator, holder: Holder, options: WorkerOptions) -> Self {
        Snowflake {
            namespace: allocator.namespace().clone(),
            supervised: SupervisedWorker::spawn(allocator, options),
            holder,
        }
    }

    /// The namespace the worker ID is leased in.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The holder label every lease of this server carries.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// The worker ID of the current worker while it holds a live lease.
    pub fn worker_id(&self) -> Option<u32> {
        self.supervised.status().ok()
    }

    /// The worker ID of the current worker while it can issue IDs, or why it
    /// cannot ([`SupervisedWorker::status`]), in words for `/readyz`.
    pub fn status(&self) -> std::result::Result<u32, String> {
        self.supervised.status().map_err(|e| match e {
            NextIdError::NotReady { reason } => reason.to_owned(),
            other => other.to_string(),
        })
    }

    /// Waits until the first join has succeeded or failed, for up to
    /// `limit`: a server that starts listening with a worker already ready
    /// answers its first snowflake request.
    pub async fn first_join(&self, limit: Duration) {
        self.supervised.wait_first_join(limit).await;
    }

    /// The next ID of the current worker.
    ///
    /// # Errors
    /// [`NextIdError::NotReady`] while no worker holds a live lease
    /// (between a loss and the next join); the worker's own errors.
    pub fn next_id(&self) -> std::result::Result<u64, NextIdError> {
        self.supervised.next_id()
    }

    /// The joins, losses and failed joins so far.
    pub fn counts(&self) -> SupervisorCounts {
        self.supervised.counts()
    }

    /// Stops the worker and releases its worker ID, waiting up to
    /// `timeout`; past it, the ID expires with its ttl.
    pub async fn stop(&self, timeout: Duration) {
        if !self.supervised.stop(timeout).await {
            tracing::warn!(
                "the worker ID was not released within {timeout:?}, or the store refused \
                 the release: it expires with its ttl"
            );
        }
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
pub async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|&stop| stop).await;
}
