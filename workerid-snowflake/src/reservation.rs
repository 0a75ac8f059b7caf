//! The time window a worker reserves in the store: how far ahead of its
//! clock it may issue timestamps, stored as the lease's watermark so that the
//! next holder of the worker ID starts above it.

use std::time::Duration;

/// A worker's reserved window, and when a renewal raises it.
///
/// Raising the watermark is a write in the store (on etcd, a Raft write with
/// a disk sync on a quorum), while a renewal that leaves it as it is only
/// extends the lease. So a reservation reaches `window` ahead and is raised
/// again only when less than `raise_below` of it is left: four renewal
/// periods ahead, raised below one and a half, make one renewal in three
/// write the watermark (see [`default_window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    window: Duration,
    raise_below: Duration,
    /// The wall time reserved up to (zero before the first reservation).
    until: Duration,
}

impl Reservation {
    /// Nothing reserved yet; each reservation reaches `window` ahead and is
    /// raised once less than one and a half `renew_every` of it is left.
    pub(crate) fn new(window: Duration, renew_every: Duration) -> Self {
        Reservation {
            window,
            raise_below: renew_every.saturating_mul(3) / 2,
            until: Duration::ZERO,
        }
    }

    /// The watermark (ms since the Unix epoch) a renewal sent at wall time
    /// `now` stores: `now + window` when the reservation runs low, else 0
    /// (the stored one stays).
    pub(crate) fn watermark_at(&self, now: Duration) -> u64 {
        if self.until.saturating_sub(now) >= self.raise_below {
            return 0;
        }
        millis(now.saturating_add(self.window))
    }

    /// Records a successful renewal that stored `watermark` (0: none).
    /// Returns the reserved wall time, in whole milliseconds.
    pub(crate) fn renewed(&mut self, watermark: u64) -> u64 {
        if watermark != 0 {
            self.until = Duration::from_millis(watermark);
        }
        millis(self.until)
    }
}

/// The window a worker reserves when its options name none: four renewal
/// periods; on a store that holds an expired ID back one more ttl
/// ([`Capabilities::quarantine`](workerid_core::Capabilities)), as many
/// whole periods as fit in two ttls. The next holder of an expired ID cannot
/// get it sooner than that, so the longer window costs its join no wait, and
/// fewer renewals write the watermark (one in five at ttl/3 instead of one in
/// three).
pub(crate) fn default_window(renew_every: Duration, ttl: Duration, quarantine: bool) -> Duration {
    let four = renew_every.saturating_mul(4);
    if !quarantine || renew_every.is_zero() {
        return four;
    }
    let periods = ttl.saturating_mul(2).as_nanos() / renew_every.as_nanos();
    four.max(renew_every.saturating_mul(u32::try_from(periods).unwrap_or(u32::MAX)))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Duration = Duration::from_secs(3);

    #[test]
    fn one_renewal_in_three_raises_the_watermark_by_default() {
        let mut reservation = Reservation::new(4 * R, R);
        let start = Duration::from_secs(1_000_000);
        let mut raised = Vec::new();
        for k in 0..10u32 {
            let now = start + R * k;
            let watermark = reservation.watermark_at(now);
            let until = reservation.renewed(watermark);
            // Whatever a renewal stores, the reservation reaches past the
            // next renewal with a margin.
            assert!(Duration::from_millis(until) >= now + R * 3 / 2, "{k}");
            if watermark != 0 {
                assert_eq!(Duration::from_millis(watermark), now + 4 * R);
                raised.push(k);
            }
        }
        assert_eq!(raised, [0, 3, 6, 9]);
    }

    fn raised(window: Duration, renewals: u32) -> Vec<u32> {
        let mut reservation = Reservation::new(window, R);
        let start = Duration::from_secs(1_000_000);
        let mut raised = Vec::new();
        for k in 0..renewals {
            let watermark = reservation.watermark_at(start + R * k);
            reservation.renewed(watermark);
            if watermark != 0 {
                raised.push(k);
            }
        }
        raised
    }

    #[test]
    fn a_store_that_holds_expired_ids_back_gets_two_ttls_and_fewer_writes() {
        let ttl = 3 * R;
        assert_eq!(default_window(R, ttl, false), 4 * R);
        let window = default_window(R, ttl, true);
        assert_eq!(window, 6 * R, "two ttls, in whole periods");
        assert_eq!(raised(window, 11), [0, 5, 10]);
        // Never shorter than the four periods a store without one gets.
        assert_eq!(default_window(R, R + R / 2, true), 4 * R);
        assert_eq!(default_window(R, 3 * R + R / 2, true), 7 * R);
    }

    #[test]
    fn a_window_of_two_periods_raises_on_every_renewal() {
        let mut reservation = Reservation::new(2 * R, R);
        let start = Duration::from_secs(1_000_000);
        for k in 0..5u32 {
            let watermark = reservation.watermark_at(start + R * k);
            assert_ne!(watermark, 0, "{k}");
            reservation.renewed(watermark);
        }
    }

    #[test]
    fn a_late_renewal_raises_at_once() {
        let mut reservation = Reservation::new(4 * R, R);
        let start = Duration::from_secs(1_000_000);
        reservation.renewed(reservation.watermark_at(start));
        // Renewals that failed for a while: less than 1.5 periods left.
        let late = start + 4 * R - R;
        assert_ne!(reservation.watermark_at(late), 0);
        assert_eq!(reservation.watermark_at(start + R), 0);
    }
}
