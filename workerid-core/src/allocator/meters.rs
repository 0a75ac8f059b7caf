//! The allocator's metric handles, taken once per allocator.

use std::fmt;
use std::time::Instant;

use metrics::{Counter, Gauge, Histogram};

use crate::observe::{
    LEASE_GRANTS, LEASE_RELEASES, LEASE_RENEWALS, LEASE_RENEWAL_SECONDS, POOL_USAGE,
};
use crate::{Listing, Namespace};

/// The metrics of one allocator's namespace.
pub(super) struct Meters {
    grants: Counter,
    renewals_ok: Counter,
    renewals_failed: Counter,
    renewal_seconds: Histogram,
    releases: Counter,
    pool_usage: Gauge,
}

impl fmt::Debug for Meters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Meters")
    }
}

impl Meters {
    pub(super) fn new(namespace: &Namespace) -> Meters {
        let ns = namespace.as_str().to_owned();
        Meters {
            grants: metrics::counter!(LEASE_GRANTS, "namespace" => ns.clone()),
            renewals_ok: metrics::counter!(LEASE_RENEWALS, "namespace" => ns.clone(), "outcome" => "ok"),
            renewals_failed: metrics::counter!(LEASE_RENEWALS, "namespace" => ns.clone(), "outcome" => "error"),
            renewal_seconds: metrics::histogram!(LEASE_RENEWAL_SECONDS, "namespace" => ns.clone()),
            releases: metrics::counter!(LEASE_RELEASES, "namespace" => ns.clone()),
            pool_usage: metrics::gauge!(POOL_USAGE, "namespace" => ns),
        }
    }

    pub(super) fn granted(&self) {
        self.grants.increment(1);
    }

    pub(super) fn renewed(&self, sent: Instant, ok: bool) {
        self.renewal_seconds.record(sent.elapsed().as_secs_f64());
        if ok {
            self.renewals_ok.increment(1);
        } else {
            self.renewals_failed.increment(1);
        }
    }

    pub(super) fn released(&self) {
        self.releases.increment(1);
    }

    /// Every ID held: the pool is full whatever the last listing said.
    pub(super) fn pool_full(&self) {
        self.pool_usage.set(1.0);
    }

    pub(super) fn listed(&self, listing: &Listing, pool_size: u64) {
        let live = listing.live().count() as f64;
        self.pool_usage.set(live / pool_size.max(1) as f64);
    }
}
