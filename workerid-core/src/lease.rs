//! A held lease, as its holder sees it.

use std::time::{Duration, Instant};

use crate::{Namespace, Token, WorkerId};

/// A worker ID held by this process, with everything needed to renew and
/// release it.
///
/// The [`deadline`](Self::deadline) is the holder's own, conservative view of
/// when the lease ends: the instant the request that granted (or last renewed)
/// it was **sent**, plus the ttl, minus a margin for clock-rate drift. Past it
/// the holder must behave as if the lease were lost, unless a renewal sent
/// earlier has succeeded.
///
/// ```no_run
/// # async fn demo(allocator: workerid_core::Allocator) -> workerid_core::Result<()> {
/// let lease = allocator.acquire().await?;
/// println!("worker {} fence {} token {}", lease.id(), lease.fence(), lease.token());
/// assert!(!lease.is_expired());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Lease {
    pub(crate) namespace: Namespace,
    pub(crate) id: WorkerId,
    pub(crate) token: Token,
    pub(crate) fence: u64,
    pub(crate) ttl: Duration,
    pub(crate) deadline: Instant,
    pub(crate) previous_watermark: u64,
}

impl Lease {
    /// The namespace the ID belongs to.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The worker ID.
    pub fn id(&self) -> WorkerId {
        self.id
    }

    /// The token that proves this holder owns the lease.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The fencing token of this grant; pass it downstream so that storage can
    /// refuse writes from an older holder of the same worker ID.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The lease length asked for, on acquire and on every renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The local deadline (monotonic clock) after which the lease must be
    /// treated as lost.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The highest watermark stored by earlier holders of this worker ID (0 if
    /// none). The snowflake worker never issues a timestamp at or below it.
    pub fn previous_watermark(&self) -> u64 {
        self.previous_watermark
    }

    /// Time left until the local deadline (zero once it has passed).
    pub fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether the local deadline has passed.
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.deadline
    }
}
