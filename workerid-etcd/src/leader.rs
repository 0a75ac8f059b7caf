//! Checking the cluster: how many members it has, and which of the endpoints
//! is the leader's, so that requests go to it.
//!
//! A cluster of one member has no stale leader to answer a keep-alive for a
//! lease its successor revoked ([etcd-io/etcd#15247]), so a renewal there
//! can be a keep-alive alone (see `lease.rs`). The count is taken at every
//! check; a check that fails counts the cluster as more than one member.
//!
//! [etcd-io/etcd#15247]: https://github.com/etcd-io/etcd/issues/15247
//!
//! A follower forwards every write to the leader, and a lease keep-alive over
//! HTTP on a connection of its own (etcd 3.4), so a request sent to the
//! leader is answered sooner, by one hop.
//!
//! The check asks the member in use which member leads, looks that member's
//! client URLs up among the endpoints, and moves there once the member
//! itself says it leads (a follower that has not yet noticed its leader die
//! still names it). It runs when the store connects, then in the background:
//! every [`ClusterCheck::every`], and a second after a member failed. A
//! failing check moves nothing: the leader is a preference, never needed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::builder::without_scheme;

/// When to check the cluster again.
#[derive(Debug)]
pub(crate) struct ClusterCheck {
    /// The interval between checks while nothing fails.
    pub every: Duration,
    /// How long a claimed check may run before it counts as lost (its task
    /// on a runtime nobody drives any more) and another may start.
    lost_after: Duration,
    epoch: Instant,
    /// When the last check started, in ms since `epoch` (the first check,
    /// when the store connects, is claimed with [`ClusterCheck::claim_now`]).
    last: AtomicU64,
    /// When a member last failed (or a check found no leader), in ms since
    /// `epoch`; [`NO_FAILURE`] when none did since the last check.
    failed: AtomicU64,
    /// Whether a check runs now.
    running: AtomicBool,
}

/// How soon after a member failed the leader is looked for again: after an
/// election (about a second with etcd's default settings; a check sooner
/// would ask a member that still names the dead leader, or none).
const AFTER_FAILURE: Duration = Duration::from_secs(1);

const NO_FAILURE: u64 = u64::MAX;

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl ClusterCheck {
    /// Checks every `every`; a check running over `lost_after` is lost.
    pub(crate) fn new(every: Duration, lost_after: Duration) -> Self {
        ClusterCheck {
            every,
            lost_after,
            epoch: Instant::now(),
            last: AtomicU64::new(0),
            failed: AtomicU64::new(NO_FAILURE),
            running: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        ms(self.epoch.elapsed())
    }

    /// Claims the next check if one is due and none runs; the claimer
    /// calls [`ClusterCheck::finish`] when done.
    pub(crate) fn claim(&self) -> bool {
        let now = self.now_ms();
        let due = match self.failed.load(Ordering::Relaxed) {
            NO_FAILURE => now.saturating_sub(self.last.load(Ordering::Relaxed)) >= ms(self.every),
            failed => now.saturating_sub(failed) >= ms(AFTER_FAILURE.min(self.every)),
        };
        due && self.claim_now()
    }

    /// Claims a check now, unless one runs (and is not lost).
    pub(crate) fn claim_now(&self) -> bool {
        let now = self.now_ms();
        if self.running.swap(true, Ordering::AcqRel)
            && now.saturating_sub(self.last.load(Ordering::Relaxed)) < ms(self.lost_after)
        {
            return false;
        }
        self.last.store(now, Ordering::Relaxed);
        self.failed.store(NO_FAILURE, Ordering::Relaxed);
        true
    }

    /// The claimed check is over (done, failed or cancelled).
    pub(crate) fn finish(&self) {
        self.running.store(false, Ordering::Release);
    }

    /// A member failed, or a check could not tell the leader: check again
    /// a second from now.
    pub(crate) fn member_failed(&self) {
        self.failed.store(self.now_ms(), Ordering::Relaxed);
    }
}

/// Whether `a` and `b` name the same endpoint: the same host and port,
/// whatever the scheme, letter case or trailing slash.
pub(crate) fn same_endpoint(a: &str, b: &str) -> bool {
    fn bare(url: &str) -> &str {
        without_scheme(url.trim()).trim_end_matches('/')
    }
    bare(a).eq_ignore_ascii_case(bare(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_compare_by_host_and_port() {
        assert!(same_endpoint("http://127.0.0.1:2379", "127.0.0.1:2379"));
        assert!(same_endpoint("https://Etcd-1:2379/", "http://etcd-1:2379"));
        assert!(!same_endpoint(
            "http://127.0.0.1:2379",
            "http://127.0.0.1:2380"
        ));
        assert!(!same_endpoint("http://etcd-1:2379", "http://etcd-2:2379"));
    }

    #[tokio::test(start_paused = true)]
    async fn checks_are_claimed_when_due_one_at_a_time() {
        let check = ClusterCheck::new(Duration::from_secs(10), Duration::from_secs(6));
        assert!(!check.claim(), "not due before the interval");
        assert!(check.claim_now(), "claimed when the store connects");
        assert!(!check.claim_now(), "one check at a time");
        check.finish();
        assert!(!check.claim(), "not due again yet");
        tokio::time::advance(Duration::from_secs(5)).await;
        check.member_failed();
        tokio::time::advance(Duration::from_millis(900)).await;
        assert!(!check.claim(), "not yet a second after the failure");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(check.claim(), "due a second after the failure");
        check.finish();
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!check.claim(), "the failure is counted once");
        tokio::time::advance(Duration::from_secs(8)).await;
        assert!(check.claim(), "due after the interval");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!check.claim_now(), "still running");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(check.claim_now(), "a check running past lost_after is lost");
    }
}
