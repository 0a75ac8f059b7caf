//! The keeper task: renews a worker's lease and its reserved window until
//! told to stop or the lease is lost, then seals the generator and releases.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tracing::Instrument;
use workerid_core::observe::ErrorType;
use workerid_core::{Allocator, Lease};

use super::WorkerState;
use crate::meters::WorkerMeters;
use crate::reservation::Reservation;
use crate::{Clock, Generator, Result};

/// Everything the keeper task needs.
pub(super) struct Keeper {
    pub(super) allocator: Allocator,
    pub(super) lease: Lease,
    pub(super) generator: Arc<Generator>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) renew_every: Duration,
    pub(super) reservation: Reservation,
    pub(super) retry_every: Duration,
    pub(super) stop: Arc<Notify>,
    pub(super) state: watch::Sender<WorkerState>,
    /// The lease deadline on the clock's monotonic time.
    pub(super) deadline: Duration,
    pub(super) meters: WorkerMeters,
}

/// One renewal, raising the reserved window when it runs low (see
/// [`Reservation`]); on success the generator may issue up to the reserved
/// window until the new deadline, which is returned.
pub(super) async fn reserve(
    allocator: &Allocator,
    lease: &mut Lease,
    generator: &Generator,
    clock: &Arc<dyn Clock>,
    reservation: &mut Reservation,
) -> Result<Duration> {
    let sent = clock.now();
    let watermark = reservation.watermark_at(sent.wall);
    allocator.renew_with_watermark(lease, watermark).await?;
    let reserved = reservation.renewed(watermark);
    let ttl = lease.ttl();
    let deadline = sent.mono + ttl - allocator.options().drift_margin(ttl);
    let layout = generator.layout();
    let window_end = layout
        .timestamp_at(Duration::from_millis(reserved))
        .unwrap_or(0);
    generator.open_until(deadline, window_end);
    clock.resync();
    Ok(deadline)
}

impl Keeper {
    pub(super) async fn run(mut self) {
        let outcome = self.keep().await;
        // Sealed, not only closed: the watermark left for the next holder is
        // the last timestamp issued, so no call in flight may issue another.
        let last = self.generator.seal();
        let state = match outcome {
            Ok(()) => {
                let last = self.layout_ms(last);
                match self
                    .allocator
                    .release_with_watermark(&self.lease, last)
                    .await
                {
                    Ok(()) => {
                        tracing::info!(worker_id = self.lease.id().get(), "released");
                        WorkerState::Stopped
                    }
                    // No longer ours (taken, or expired): nothing is held.
                    Err(e) if e.is_lease_lost() => {
                        tracing::info!(
                            worker_id = self.lease.id().get(),
                            "stopped; the lease was no longer this worker's: {e}"
                        );
                        WorkerState::Stopped
                    }
                    Err(e) => {
                        tracing::warn!("could not release worker ID {}: {e}", self.lease.id());
                        WorkerState::StoppedUnreleased {
                            reason: e.to_string(),
                        }
                    }
                }
            }
            Err(reason) => {
                self.meters.lost();
                tracing::error!(worker_id = self.lease.id().get(), "lease lost: {reason}");
                WorkerState::Lost { reason }
            }
        };
        let _ = self.state.send(state);
    }

    fn layout_ms(&self, ts: u64) -> u64 {
        let time = self.generator.layout().time_of(ts);
        u64::try_from(time.as_millis()).unwrap_or(u64::MAX)
    }

    /// Renews until told to stop (`Ok`) or the lease is lost (`Err`).
    async fn keep(&mut self) -> std::result::Result<(), String> {
        loop {
            tokio::select! {
                _ = self.stop.notified() => return Ok(()),
                _ = tokio::time::sleep(self.renew_every) => {}
            }
            loop {
                let span = tracing::info_span!(
                    "workerid.worker.renew",
                    "workerid.namespace" = self.allocator.namespace().as_str(),
                    "workerid.worker_id" = self.lease.id().get(),
                    "error.type" = tracing::field::Empty,
                );
                let renewed = reserve(
                    &self.allocator,
                    &mut self.lease,
                    &self.generator,
                    &self.clock,
                    &mut self.reservation,
                )
                .instrument(span.clone())
                .await;
                if let Err(e) = &renewed {
                    span.record("error.type", e.error_type());
                }
                let now = self.clock.now();
                if let Ok(deadline) = renewed {
                    self.deadline = deadline;
                }
                self.meters
                    .renewal(self.deadline, now.mono, now.wall, self.generator.layout());
                match renewed {
                    Ok(_) => break,
                    Err(e) if e.is_retryable() => {
                        let mono = now.mono;
                        let deadline = self.deadline;
                        if mono >= deadline {
                            return Err(format!(
                                "the lease deadline passed while the store was unavailable: {e}"
                            ));
                        }
                        tracing::warn!("renewal failed, retrying: {e}");
                        self.meters.retried();
                        tokio::select! {
                            _ = self.stop.notified() => return Ok(()),
                            _ = tokio::time::sleep(self.retry_every.min(deadline - mono)) => {}
                        }
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
    }
}
