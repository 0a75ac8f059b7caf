//! Keep-alive streams shared by the etcd leases this process renews.
//!
//! etcd renews leases over a bidirectional stream that carries keep-alives of
//! any lease, each answer naming its lease. Opening a stream per renewal
//! costs etcd more than the keep-alive itself, and a stream per lease is a
//! goroutine per lease on the server, so a store keeps [`LANES`] streams
//! open and sends each lease's keep-alives on one of them. Several, not one:
//! etcd answers one stream's keep-alives one after another, and a keep-alive
//! of a lease that just expired waits for its revocation.
//!
//! At most one keep-alive per lease is in flight on a lane, so an answer is
//! the answer to the request its waiter sent. A lease whose answer did not
//! come in time is not sent on its lane again until that answer comes: a late
//! answer must never be taken for a newer request's, whose sending time the
//! caller counts the ttl from. Meanwhile, and whenever a lane has no working
//! stream, the caller sends the keep-alive the ordinary way (with retries on
//! other members) on a stream of its own, which then serves the lane if the
//! lane has none.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use etcd_client::{LeaseKeepAliveStream, LeaseKeeper};
use tokio::sync::oneshot;

use crate::lock;

/// The streams one store keeps open.
const LANES: usize = 8;

/// The open keep-alive streams, each serving the leases that map to it.
#[derive(Debug, Default)]
pub(crate) struct KeepAlives {
    lanes: [Mutex<Option<Arc<Lane>>>; LANES],
}

/// One open stream.
#[derive(Debug)]
struct Lane {
    /// The request side; its lease ID is set before each send.
    keeper: tokio::sync::Mutex<LeaseKeeper>,
    /// The keep-alives sent and not answered yet, by lease.
    waiting: Mutex<HashMap<i64, Waiter>>,
    /// The stream ended or failed: nothing more will be answered.
    broken: AtomicBool,
}

#[derive(Debug)]
enum Waiter {
    /// Its sender waits for the answer (the ttl etcd gave, 0 if gone).
    Waiting(oneshot::Sender<i64>),
    /// Its sender gave up waiting; the answer may still come.
    Late,
}

impl KeepAlives {
    fn slot(&self, lease: i64) -> &Mutex<Option<Arc<Lane>>> {
        &self.lanes[(lease.unsigned_abs() % LANES as u64) as usize]
    }

    /// Sends one keep-alive for `lease` on its lane and waits up to
    /// `timeout` for the answer: `Some(alive)`, or None when the lane cannot
    /// take it now (no working stream, or this lease's previous keep-alive
    /// is still unanswered) or the stream failed.
    pub(crate) async fn send(&self, lease: i64, timeout: Duration) -> Option<bool> {
        // A broken lane stays in its slot until `keep` replaces it.
        let lane = lock(self.slot(lease)).clone()?;
        if lane.broken.load(Ordering::Acquire) {
            return None;
        }
        let answer = lane.register(lease)?;
        let mut sent = false;
        let outcome = tokio::time::timeout(timeout, async {
            {
                let mut keeper = lane.keeper.lock().await;
                keeper.id = lease;
                keeper.keep_alive().await.ok()?;
                sent = true;
            }
            answer.await.ok()
        })
        .await;
        match outcome {
            Ok(Some(ttl)) => Some(ttl > 0),
            Err(_) if sent => {
                lane.mark_late(lease);
                None
            }
            Ok(None) | Err(_) => {
                lock(&lane.waiting).remove(&lease);
                None
            }
        }
    }

    /// Lets the stream a keep-alive of `lease` opened serve that lease's
    /// lane, if the lane has no working stream.
    pub(crate) fn keep(&self, lease: i64, keeper: LeaseKeeper, stream: LeaseKeepAliveStream) {
        let mut slot = lock(self.slot(lease));
        if slot
            .as_ref()
            .is_some_and(|lane| !lane.broken.load(Ordering::Acquire))
        {
            return;
        }
        let lane = Arc::new(Lane {
            keeper: tokio::sync::Mutex::new(keeper),
            waiting: Mutex::new(HashMap::new()),
            broken: AtomicBool::new(false),
        });
        tokio::spawn(read_answers(Arc::downgrade(&lane), stream));
        *slot = Some(lane);
    }

    /// Forgets a late answer `lease` may still get (revoked or gone).
    pub(crate) fn close(&self, lease: i64) {
        if let Some(lane) = lock(self.slot(lease)).as_ref() {
            let mut waiting = lock(&lane.waiting);
            if matches!(waiting.get(&lease), Some(Waiter::Late)) {
                waiting.remove(&lease);
            }
        }
    }
}

impl Lane {
    /// Registers a keep-alive of `lease` about to be sent; None if one is
    /// already in flight or late.
    fn register(&self, lease: i64) -> Option<oneshot::Receiver<i64>> {
        let mut waiting = lock(&self.waiting);
        if waiting.contains_key(&lease) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        waiting.insert(lease, Waiter::Waiting(tx));
        Some(rx)
    }

    fn mark_late(&self, lease: i64) {
        if let Some(waiter) = lock(&self.waiting).get_mut(&lease) {
            *waiter = Waiter::Late;
        }
    }

    fn answered(&self, lease: i64, ttl: i64) {
        if let Some(Waiter::Waiting(tx)) = lock(&self.waiting).remove(&lease) {
            let _ = tx.send(ttl);
        }
    }

    /// The stream is over: every waiter hears so (its sender is dropped).
    fn break_off(&self) {
        self.broken.store(true, Ordering::Release);
        lock(&self.waiting).clear();
    }
}

/// Hands each answer on `stream` to its waiter until the stream ends or the
/// lane is dropped (dropping the keeper ends the request side, and etcd then
/// ends the stream).
async fn read_answers(lane: Weak<Lane>, mut stream: LeaseKeepAliveStream) {
    while let Ok(Some(answer)) = stream.message().await {
        let Some(lane) = lane.upgrade() else { return };
        lane.answered(answer.id(), answer.ttl());
    }
    if let Some(lane) = lane.upgrade() {
        tracing::debug!("an etcd keep-alive stream ended; the next keep-alive opens another");
        lane.break_off();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane() -> Lane {
        let (sender, _receiver) = tokio::sync::mpsc::channel(1);
        Lane {
            keeper: tokio::sync::Mutex::new(LeaseKeeper { id: 0, sender }),
            waiting: Mutex::new(HashMap::new()),
            broken: AtomicBool::new(false),
        }
    }

    #[test]
    fn an_answer_reaches_the_waiter_of_its_lease_only() {
        let lane = lane();
        let mut first = lane.register(1).expect("registered");
        let mut second = lane.register(2).expect("registered");
        lane.answered(2, 12);
        assert_eq!(second.try_recv(), Ok(12));
        assert!(first.try_recv().is_err(), "lease 1 got lease 2's answer");
        lane.answered(1, 0);
        assert_eq!(first.try_recv(), Ok(0));
    }

    #[test]
    fn one_keep_alive_per_lease_is_in_flight() {
        let lane = lane();
        let _pending = lane.register(7).expect("registered");
        assert!(lane.register(7).is_none());
        lane.answered(7, 10);
        assert!(lane.register(7).is_some());
    }

    #[test]
    fn a_late_answer_is_never_taken_for_a_newer_request() {
        let lane = lane();
        let _given_up = lane.register(7).expect("registered");
        lane.mark_late(7);
        // Until the late answer comes, the lease is not sent on this lane.
        assert!(lane.register(7).is_none());
        lane.answered(7, 10);
        let mut newer = lane.register(7).expect("registered after the late answer");
        assert!(newer.try_recv().is_err(), "the late answer was delivered");
    }

    #[test]
    fn a_broken_stream_tells_every_waiter() {
        let lane = lane();
        let mut waiting = lane.register(3).expect("registered");
        lane.break_off();
        assert!(lane.broken.load(Ordering::Acquire));
        assert!(matches!(
            waiting.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
    }
}
