//! etcd leases granted ahead of need, so that acquire sends its transaction
//! alone, or with a keep-alive, instead of waiting for a grant first.
//!
//! Every lease is granted for its ttl plus `LEASE_SLACK` (1 s). A spare
//! taken less than that after its grant (or its last extension) was *sent*,
//! on the local monotonic clock, still covers a whole ttl from now: acquire
//! uses it as it is, one transaction. An older spare is used while at least
//! half its ttl is left, with a keep-alive sent together with the acquire
//! transaction, which extends it to at least send instant + ttl, as the
//! caller's deadline assumes. If that keep-alive fails, acquire moves the new
//! grant to a freshly granted lease before it answers (see
//! `EtcdStore::acquire`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lock;

/// Spare leases kept per ttl: [`Spares::take`] asks for a refill below this.
const KEEP: usize = 2;

/// A released lease is kept up to this many spares (one more than [`KEEP`]),
/// so that an acquire whose refill is on its way and a release right after
/// it (a worker that comes and goes) cost neither a revocation nor a grant.
const KEEP_RELEASED: usize = KEEP + 1;

#[derive(Debug, Default)]
struct Pool {
    leases: Vec<(i64, Instant)>,
    pending: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Spares {
    by_ttl: Mutex<HashMap<i64, Pool>>,
}

impl Spares {
    /// A spare lease of `ttl_secs` with at least half of it left (and the
    /// instant its grant or last extension was sent), and whether
    /// the caller should grant one more (then it must call [`Spares::put`]
    /// or [`Spares::gave_up`]). Spares too old to use are returned in `stale`
    /// for revocation.
    pub(crate) fn take(
        &self,
        ttl_secs: i64,
        stale: &mut Vec<i64>,
    ) -> (Option<(i64, Instant)>, bool) {
        let mut by_ttl = lock(&self.by_ttl);
        let pool = by_ttl.entry(ttl_secs).or_default();
        let fresh_for = Duration::from_secs(ttl_secs.unsigned_abs()) / 2;
        let mut found = None;
        while let Some((lease, sent)) = pool.leases.pop() {
            if sent.elapsed() < fresh_for {
                found = Some((lease, sent));
                break;
            }
            stale.push(lease);
        }
        let refill = pool.leases.len() + pool.pending < KEEP;
        if refill {
            pool.pending += 1;
        }
        (found, refill)
    }

    /// Adds a lease whose grant was sent at `sent`.
    pub(crate) fn put(&self, ttl_secs: i64, lease: i64, sent: Instant) {
        let mut by_ttl = lock(&self.by_ttl);
        let pool = by_ttl.entry(ttl_secs).or_default();
        pool.pending = pool.pending.saturating_sub(1);
        pool.leases.push((lease, sent));
    }

    /// Keeps a lease that no key uses any more (its holder released it),
    /// extended last at `sent`, if fewer than [`KEEP_RELEASED`] spares wait;
    /// false when the caller should revoke it instead.
    pub(crate) fn give_back(&self, ttl_secs: i64, lease: i64, sent: Instant) -> bool {
        let mut by_ttl = lock(&self.by_ttl);
        let pool = by_ttl.entry(ttl_secs).or_default();
        let room = pool.leases.len() < KEEP_RELEASED;
        if room {
            pool.leases.push((lease, sent));
        }
        room
    }

    /// A refill [`Spares::take`] asked for failed.
    pub(crate) fn gave_up(&self, ttl_secs: i64) {
        let mut by_ttl = lock(&self.by_ttl);
        let pool = by_ttl.entry(ttl_secs).or_default();
        pool.pending = pool.pending.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_are_used_fresh_and_refilled_up_to_two() {
        let spares = Spares::default();
        let mut stale = Vec::new();
        assert_eq!(spares.take(10, &mut stale), (None, true));
        assert_eq!(spares.take(10, &mut stale), (None, true));
        assert_eq!(
            spares.take(10, &mut stale),
            (None, false),
            "two refills pending"
        );
        spares.put(10, 1, Instant::now());
        spares.put(10, 2, Instant::now() - Duration::from_secs(6));
        // 2 is older than half the ttl: set aside for revocation.
        let (taken, refill) = spares.take(10, &mut stale);
        assert_eq!((taken.map(|(l, _)| l), refill), (Some(1), true));
        assert_eq!(stale, vec![2]);
        spares.gave_up(10);
        assert_eq!(spares.take(10, &mut stale), (None, true));
        assert_eq!(spares.take(5, &mut stale), (None, true), "per ttl");
        assert!(spares.give_back(5, 7, Instant::now()));
        assert!(spares.give_back(5, 8, Instant::now()));
        assert!(spares.give_back(5, 9, Instant::now()));
        assert!(!spares.give_back(5, 10, Instant::now()), "three at most");
        assert_eq!(spares.take(5, &mut stale).0.map(|(l, _)| l), Some(9));
    }

    #[test]
    fn a_worker_that_comes_and_goes_costs_no_grant_and_no_revocation() {
        let spares = Spares::default();
        let mut stale = Vec::new();
        assert!(spares.take(10, &mut stale).1);
        assert!(spares.take(10, &mut stale).1);
        spares.put(10, 1, Instant::now());
        spares.put(10, 2, Instant::now());
        // Acquire (takes a spare, asks for a refill), release (gives it back).
        let (lease, refill) = spares.take(10, &mut stale);
        assert!(refill);
        spares.put(10, 3, Instant::now());
        assert!(spares.give_back(10, lease.unwrap().0, Instant::now()));
        for _ in 0..100 {
            let (lease, refill) = spares.take(10, &mut stale);
            assert!(!refill, "no grant");
            assert!(
                spares.give_back(10, lease.unwrap().0, Instant::now()),
                "no revocation"
            );
        }
        assert!(stale.is_empty());
    }
}
