//! The etcd leases a worker ID's keys ride on: granted with some slack over
//! the ttl, kept alive on shared streams, and kept spare for the next acquire.

use std::time::{Duration, Instant};

use workerid_core::Result;

use crate::{nonsense, EtcdStore};

/// etcd counts lease ttls in whole seconds (the allocator only lets whole
/// seconds through: the granularity is declared).
pub(crate) fn ttl_secs(ttl: Duration) -> i64 {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
}

/// Every etcd lease the store grants lives this much longer than the ttl it
/// carries a worker ID for, so that a spare lease granted less than this long
/// ago still covers a whole ttl and acquire can use it without a keep-alive:
/// acquire is then one transaction. Renewals extend to the same length, so a
/// lease may outlive its holder's deadline by this much more (declared in
/// [`Capabilities::expiry_lag`]).
pub(crate) const LEASE_SLACK: Duration = Duration::from_secs(1);

impl EtcdStore {
    /// A new etcd lease for `ttl` (granted for `ttl` + [`LEASE_SLACK`]):
    /// (lease ID, ttl in seconds).
    pub(crate) async fn grant(&self, ttl: Duration) -> Result<(i64, i64)> {
        let secs = ttl_secs(ttl);
        let granted = secs.saturating_add(ttl_secs(LEASE_SLACK));
        let answer = self
            .inner
            .cluster
            .call("lease grant", |mut c| async move {
                c.lease_grant(granted, None).await
            })
            .await?
            .value;
        if answer.ttl() <= 0 || !answer.error().is_empty() {
            return Err(nonsense("lease grant", &answer));
        }
        Ok((answer.id(), secs))
    }

    /// Sends one keep-alive for `lease`; false when etcd no longer has it.
    /// On the stream of the lease's lane (see [`crate::keepalive`]); else on
    /// a new stream, which serves the lane if it has none.
    pub(crate) async fn keep_alive(&self, lease: i64) -> Result<bool> {
        let open = &self.inner.keep_alives;
        if let Some(alive) = open.send(lease, self.inner.request_timeout).await {
            // Renewals may be keep-alives alone: they keep the member count
            // current too, as requests through `Cluster::call` do.
            self.inner.cluster.check_if_due();
            return Ok(alive);
        }
        let opened = self
            .inner
            .cluster
            .call("lease keep-alive", |mut c| async move {
                match c.lease_keep_alive(lease).await {
                    Ok(pair) => Ok(Some(pair)),
                    Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(None),
                    Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => {
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            })
            .await?
            .value;
        Ok(match opened {
            Some((keeper, stream)) => {
                open.keep(lease, keeper, stream);
                true
            }
            None => false,
        })
    }

    /// A spare lease of `ttl_secs` if a fresh one is ready, with the instant
    /// it was granted or last extended; asks for another in the background.
    pub(crate) fn spare_lease(&self, ttl_secs: i64) -> Option<(i64, Instant)> {
        let mut stale = Vec::new();
        let (lease, refill) = self.inner.spares.take(ttl_secs, &mut stale);
        for old in stale {
            self.revoke_later(old);
        }
        if refill {
            let store = self.clone();
            tokio::spawn(async move {
                let sent = Instant::now();
                let ttl = Duration::from_secs(ttl_secs.unsigned_abs());
                match store.grant(ttl).await {
                    Ok((lease, _)) => store.inner.spares.put(ttl_secs, lease, sent),
                    Err(_) => store.inner.spares.gave_up(ttl_secs),
                }
            });
        }
        lease
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_are_whole_seconds_rounded_up() {
        assert_eq!(ttl_secs(Duration::from_secs(2)), 2);
        assert_eq!(ttl_secs(Duration::from_millis(2001)), 3);
        assert_eq!(ttl_secs(Duration::from_millis(1)), 1);
    }
}
