//! Options of an [`Allocator`](crate::Allocator): pool size, lease length, timeouts.

use std::time::Duration;

use crate::{Capabilities, Error, Holder, Result, MAX_WORKER_BITS, MAX_WORKER_ID_LIMIT};

/// The default `worker_bits`: 10, the standard snowflake layout (IDs 0..=1023).
pub const DEFAULT_WORKER_BITS: u8 = 10;
/// The default `max_lease_time`: 5 minutes, as in libx.net/workerid.
pub const DEFAULT_MAX_LEASE_TIME: Duration = Duration::from_secs(5 * 60);
/// The longest `max_lease_time`: 7 days. An ID whose holder died stays
/// taken for up to a ttl, and every deadline is an instant plus a ttl, so a
/// bound keeps both finite.
pub const MAX_LEASE_TIME_LIMIT: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// The default bound on one store request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The default allowance for clock-rate drift, in parts per million of the ttl (1 %).
pub const DEFAULT_DRIFT_ALLOWANCE_PPM: u32 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PoolSize {
    Bits(u8),
    MaxId(u32),
}

/// How an [`Allocator`](crate::Allocator) leases worker IDs.
///
/// Both of libx.net/workerid's ways to size the pool exist: [`worker_bits`](Self::worker_bits)
/// (the pool is `0..=2^bits-1`) and [`max_worker_id`](Self::max_worker_id); the
/// last one set wins. Setters never fail: the options are checked, against the
/// store's [`Capabilities`] too, when the allocator is made.
///
/// ```
/// use std::time::Duration;
/// use workerid_core::LeaseOptions;
///
/// let options = LeaseOptions::new()
///     .worker_bits(8)
///     .max_lease_time(Duration::from_secs(60))
///     .ttl(Duration::from_secs(30));
/// assert_eq!(options.pool_max_worker_id().unwrap(), 255);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseOptions {
    pool_size: PoolSize,
    max_lease_time: Duration,
    ttl: Option<Duration>,
    request_timeout: Duration,
    drift_allowance_ppm: u32,
    holder: Option<Holder>,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            pool_size: PoolSize::Bits(DEFAULT_WORKER_BITS),
            max_lease_time: DEFAULT_MAX_LEASE_TIME,
            ttl: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            drift_allowance_ppm: DEFAULT_DRIFT_ALLOWANCE_PPM,
            holder: None,
        }
    }
}

impl LeaseOptions {
    /// The defaults: 10 worker bits, 5-minute leases, 10 s request timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// The label stored with every lease this allocator takes, shown to
    /// operators by the store's listing. Without it: [`Holder::from_env`]
    /// (`WORKERID_HOLDER`, else host name and process ID).
    pub fn holder(mut self, holder: Holder) -> Self {
        self.holder = Some(holder);
        self
    }

    /// The pool is `0..=2^bits - 1`; `bits` must be in `1..=22` (libx.net/workerid's
    /// `WithWorkerBits`).
    pub fn worker_bits(mut self, bits: u8) -> Self {
        self.pool_size = PoolSize::Bits(bits);
        self
    }

    /// The pool is `0..=max_worker_id`; at most 2^22 - 1 (libx.net/workerid's `WithMaxWorkerID`).
    pub fn max_worker_id(mut self, max_worker_id: u32) -> Self {
        self.pool_size = PoolSize::MaxId(max_worker_id);
        self
    }

    /// The longest lease that may be asked for (libx.net/workerid's `WithMaxLeaseTime`);
    /// also the default ttl. At most [`MAX_LEASE_TIME_LIMIT`].
    pub fn max_lease_time(mut self, max_lease_time: Duration) -> Self {
        self.max_lease_time = max_lease_time;
        self
    }

    /// The lease length of [`Allocator::acquire`](crate::Allocator::acquire) and of
    /// its renewals; defaults to `max_lease_time`.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// A store request that has not answered within this time fails with
    /// [`Error::Unavailable`] (default 10 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How much faster the local clock may run than the store's, in parts per
    /// million of the ttl (default 10 000 = 1 %): the local deadline of a lease
    /// is `send instant + ttl - ttl * ppm / 1e6`. At most 500 000.
    pub fn drift_allowance_ppm(mut self, ppm: u32) -> Self {
        self.drift_allowance_ppm = ppm;
        self
    }

    /// The `max_worker_id` these options describe.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `worker_bits` is outside `1..=22` or
    /// `max_worker_id` above 2^22 - 1.
    pub fn pool_max_worker_id(&self) -> Result<u32> {
        match self.pool_size {
            PoolSize::Bits(bits) if (1..=MAX_WORKER_BITS).contains(&bits) => Ok((1 << bits) - 1),
            PoolSize::Bits(bits) => Err(Error::invalid_config(format!(
                "worker_bits is {bits}; it must be in 1..={MAX_WORKER_BITS}"
            ))),
            PoolSize::MaxId(max) if max <= MAX_WORKER_ID_LIMIT => Ok(max),
            PoolSize::MaxId(max) => Err(Error::invalid_config(format!(
                "max_worker_id is {max}; it must be at most {MAX_WORKER_ID_LIMIT} (22 bits)"
            ))),
        }
    }

    /// The ttl used by `acquire`.
    pub fn default_ttl(&self) -> Duration {
        self.ttl.unwrap_or(self.max_lease_time)
    }

    /// The holder label set with [`holder`](Self::holder), if any.
    pub fn get_holder(&self) -> Option<&Holder> {
        self.holder.as_ref()
    }

    /// The request timeout.
    pub fn get_request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The largest ttl allowed.
    pub fn get_max_lease_time(&self) -> Duration {
        self.max_lease_time
    }

    /// Checks every option against the contract and the store's capabilities.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad value.
    pub fn validate(&self, caps: &Capabilities) -> Result<()> {
        let max = self.pool_max_worker_id()?;
        if caps.max_worker_bits < 32 && u64::from(max) >= 1u64 << caps.max_worker_bits {
            return Err(Error::invalid_config(format!(
                "max_worker_id {max} needs more than the {} worker bits this store supports",
                caps.max_worker_bits
            )));
        }
        if self.max_lease_time.is_zero() {
            return Err(Error::invalid_config("max_lease_time is zero"));
        }
        if self.max_lease_time > MAX_LEASE_TIME_LIMIT {
            return Err(Error::invalid_config(format!(
                "max_lease_time {:?} is longer than the limit {MAX_LEASE_TIME_LIMIT:?} (7 days)",
                self.max_lease_time
            )));
        }
        if self.request_timeout.is_zero() {
            return Err(Error::invalid_config("request_timeout is zero"));
        }
        if self.drift_allowance_ppm > 500_000 {
            return Err(Error::invalid_config(format!(
                "drift_allowance_ppm is {}; at most 500000 (50 %) makes sense",
                self.drift_allowance_ppm
            )));
        }
        self.check_ttl(self.default_ttl(), caps)
    }

    /// Checks one ttl: `0 < ttl <= max_lease_time` (and at most
    /// [`MAX_LEASE_TIME_LIMIT`]), at least the store's
    /// minimum, a whole multiple of its granularity. Never rounds.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the ttl and the bound it breaks.
    pub fn check_ttl(&self, ttl: Duration, caps: &Capabilities) -> Result<()> {
        if ttl.is_zero() {
            return Err(Error::invalid_config("ttl is zero"));
        }
        if ttl > self.max_lease_time.min(MAX_LEASE_TIME_LIMIT) {
            return Err(Error::invalid_config(format!(
                "ttl {ttl:?} is longer than max_lease_time {:?}",
                self.max_lease_time.min(MAX_LEASE_TIME_LIMIT)
            )));
        }
        if ttl < caps.min_ttl {
            return Err(Error::invalid_config(format!(
                "ttl {ttl:?} is shorter than this store's minimum {:?}",
                caps.min_ttl
            )));
        }
        let granularity = caps.ttl_granularity.as_nanos().max(1);
        if !ttl.as_nanos().is_multiple_of(granularity) {
            return Err(Error::invalid_config(format!(
                "ttl {ttl:?} is not a whole multiple of this store's granularity {:?}",
                caps.ttl_granularity
            )));
        }
        Ok(())
    }

    /// The local safety margin for a lease of `ttl`.
    pub fn drift_margin(&self, ttl: Duration) -> Duration {
        ttl.mul_f64(f64::from(self.drift_allowance_ppm) / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_size_from_bits_or_max() {
        assert_eq!(LeaseOptions::new().pool_max_worker_id().unwrap(), 1023);
        assert_eq!(
            LeaseOptions::new()
                .worker_bits(1)
                .pool_max_worker_id()
                .unwrap(),
            1
        );
        assert_eq!(
            LeaseOptions::new()
                .worker_bits(22)
                .pool_max_worker_id()
                .unwrap(),
            MAX_WORKER_ID_LIMIT
        );
        assert_eq!(
            LeaseOptions::new()
                .max_worker_id(31)
                .pool_max_worker_id()
                .unwrap(),
            31
        );
        assert_eq!(
            LeaseOptions::new()
                .worker_bits(3)
                .max_worker_id(0)
                .pool_max_worker_id()
                .unwrap(),
            0
        );
        for bad in [
            LeaseOptions::new().worker_bits(0),
            LeaseOptions::new().worker_bits(23),
            LeaseOptions::new().max_worker_id(MAX_WORKER_ID_LIMIT + 1),
        ] {
            assert!(matches!(
                bad.pool_max_worker_id(),
                Err(Error::InvalidConfig { .. })
            ));
        }
    }

    #[test]
    fn ttl_bounds_are_checked_never_rounded() {
        let caps = Capabilities {
            min_ttl: Duration::from_secs(2),
            ttl_granularity: Duration::from_secs(1),
            ..Capabilities::default()
        };
        let options = LeaseOptions::new().max_lease_time(Duration::from_secs(60));
        assert!(options.check_ttl(Duration::from_secs(2), &caps).is_ok());
        assert!(options.check_ttl(Duration::from_secs(60), &caps).is_ok());
        for bad in [0, 1_000, 2_500, 61_000] {
            let err = options
                .check_ttl(Duration::from_millis(bad), &caps)
                .unwrap_err();
            assert!(matches!(err, Error::InvalidConfig { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn a_lease_longer_than_the_limit_is_refused_not_overflowed() {
        let caps = Capabilities::default();
        let at_limit = LeaseOptions::new().max_lease_time(MAX_LEASE_TIME_LIMIT);
        assert!(at_limit.validate(&caps).is_ok());
        for too_long in [MAX_LEASE_TIME_LIMIT + Duration::from_secs(1), Duration::MAX] {
            let options = LeaseOptions::new().max_lease_time(too_long);
            let err = options.validate(&caps).unwrap_err();
            assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
            assert!(options.check_ttl(too_long, &caps).is_err());
        }
    }

    #[test]
    fn store_limits_apply() {
        let caps = Capabilities {
            max_worker_bits: 8,
            ..Capabilities::default()
        };
        assert!(LeaseOptions::new().worker_bits(8).validate(&caps).is_ok());
        assert!(LeaseOptions::new().worker_bits(9).validate(&caps).is_err());
        assert!(LeaseOptions::new()
            .max_worker_id(256)
            .validate(&caps)
            .is_err());
        assert!(LeaseOptions::new()
            .worker_bits(8)
            .request_timeout(Duration::ZERO)
            .validate(&caps)
            .is_err());
        assert!(LeaseOptions::new()
            .worker_bits(8)
            .drift_allowance_ppm(600_000)
            .validate(&caps)
            .is_err());
    }
}
