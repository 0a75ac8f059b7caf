//! What can go wrong when making snowflake IDs.

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when making snowflake IDs: the generator's
/// clock and state, and the lease under a [`Worker`](crate::Worker). Which
/// are worth retrying: [`Error::is_retryable`].
///
/// The clock variants are libx.net/workerid's `ErrNotReady`,
/// `ErrClockDriftTryLater` and `ErrClockDriftTooLargeToRecover`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad layout, epoch, batch size, period or window, naming the value.
    /// Raised before any I/O; nothing changes.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong, naming the value.
        reason: String,
    },

    /// The generator does not issue IDs now: it is starting, stopped, lost
    /// its lease, or its reserved time window ran out. Retrying on another
    /// worker can help.
    #[error("worker not ready: {reason}")]
    NotReady {
        /// Why.
        reason: String,
    },

    /// The wall clock went back by more than the worker blocks for, but not
    /// so far that it gives up: try again later, preferably on another worker.
    #[error("clock drift of {drift:?}: try later")]
    ClockDriftTryLater {
        /// How far the clock is behind the last timestamp used.
        drift: std::time::Duration,
    },

    /// The wall clock is so far behind the timestamps already used (or the
    /// previous holder's watermark) that the worker gives up and leaves,
    /// releasing its worker ID.
    #[error("clock drift of {drift:?} is too large to recover from")]
    ClockDriftTooLarge {
        /// How far the clock is behind.
        drift: std::time::Duration,
    },

    /// The lease store's answer while joining, renewing or leaving
    /// ([`workerid_core::Error::NoAvailableId`], `Unavailable`, ...).
    #[error(transparent)]
    Lease(#[from] workerid_core::Error),
}

impl Error {
    /// Builds [`Error::InvalidConfig`].
    pub fn invalid_config(reason: impl Into<String>) -> Self {
        Error::InvalidConfig {
            reason: reason.into(),
        }
    }

    /// Whether retrying the same call can succeed: [`Error::NotReady`],
    /// [`Error::ClockDriftTryLater`], and a lease error that is retryable
    /// ([`workerid_core::Error::is_retryable`]).
    ///
    /// ```
    /// use workerid_snowflake::Error;
    /// assert!(Error::NotReady { reason: "starting".into() }.is_retryable());
    /// assert!(Error::from(workerid_core::Error::unavailable("redis", "refused")).is_retryable());
    /// assert!(!Error::from(workerid_core::Error::NoAvailableId { max_worker_id: 3 }).is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::NotReady { .. } | Error::ClockDriftTryLater { .. } => true,
            Error::Lease(e) => e.is_retryable(),
            _ => false,
        }
    }
}

/// Why a generator issued no ID ([`Generator::next_id`], [`Worker::next_id`],
/// [`LocalGenerator::next_id`]): libx.net/workerid's `ErrNotReady`,
/// `ErrClockDriftTryLater` and `ErrClockDriftTooLargeToRecover`. `Copy`,
/// with nothing to drop or allocate, so that a refusal costs a caller no
/// more than an ID (a generator fails closed on every call while its lease
/// is in doubt), and a caller's code keeps nothing on the stack for it.
/// Converts into [`Error`] for `?`.
///
/// ```
/// use workerid_snowflake::{Error, NextIdError};
/// let refused = NextIdError::NotReady { reason: "starting" };
/// assert!(refused.is_retryable());
/// assert!(matches!(Error::from(refused), Error::NotReady { reason } if reason == "starting"));
/// ```
///
/// [`Generator::next_id`]: crate::Generator::next_id
/// [`Worker::next_id`]: crate::Worker::next_id
/// [`LocalGenerator::next_id`]: crate::LocalGenerator::next_id
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NextIdError {
    /// As [`Error::NotReady`]: closed, stopped, past the lease deadline, or
    /// past the reserved window.
    #[error("worker not ready: {reason}")]
    NotReady {
        /// Why.
        reason: &'static str,
    },

    /// As [`Error::ClockDriftTryLater`].
    #[error("clock drift of {drift:?}: try later")]
    ClockDriftTryLater {
        /// How far the clock is behind the last timestamp used.
        drift: std::time::Duration,
    },

    /// As [`Error::ClockDriftTooLarge`]: a worker leaves.
    #[error("clock drift of {drift:?} is too large to recover from")]
    ClockDriftTooLarge {
        /// How far the clock is behind.
        drift: std::time::Duration,
    },
}

impl NextIdError {
    /// Whether retrying can succeed: [`NextIdError::NotReady`] and
    /// [`NextIdError::ClockDriftTryLater`]. On a
    /// [`SupervisedWorker`](crate::SupervisedWorker), the next worker
    /// answers a retry, until it
    /// [`is_ended`](crate::SupervisedWorker::is_ended) (stopped, or its
    /// settings refused); a [`Worker`](crate::Worker) that lost its lease or
    /// stopped answers `NotReady` for good (its
    /// [`state`](crate::Worker::state) says so), so a retry loop on a bare
    /// worker checks it.
    pub fn is_retryable(&self) -> bool {
        match self {
            NextIdError::NotReady { .. } | NextIdError::ClockDriftTryLater { .. } => true,
            NextIdError::ClockDriftTooLarge { .. } => false,
        }
    }
}

impl From<NextIdError> for Error {
    fn from(e: NextIdError) -> Self {
        match e {
            NextIdError::NotReady { reason } => Error::NotReady {
                reason: reason.to_owned(),
            },
            NextIdError::ClockDriftTryLater { drift } => Error::ClockDriftTryLater { drift },
            NextIdError::ClockDriftTooLarge { drift } => Error::ClockDriftTooLarge { drift },
        }
    }
}

impl workerid_core::observe::ErrorType for NextIdError {
    fn error_type(&self) -> &'static str {
        match self {
            NextIdError::NotReady { .. } => "not_ready",
            NextIdError::ClockDriftTryLater { .. } => "clock_drift_try_later",
            NextIdError::ClockDriftTooLarge { .. } => "clock_drift_too_large",
        }
    }
}

impl workerid_core::observe::ErrorType for Error {
    fn error_type(&self) -> &'static str {
        match self {
            Error::InvalidConfig { .. } => "invalid_config",
            Error::NotReady { .. } => "not_ready",
            Error::ClockDriftTryLater { .. } => "clock_drift_try_later",
            Error::ClockDriftTooLarge { .. } => "clock_drift_too_large",
            Error::Lease(e) => e.error_type(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use workerid_core::observe::ErrorType;

    use super::*;

    #[test]
    fn a_refusal_becomes_the_same_error_with_the_same_verdicts() {
        let drift = Duration::from_millis(1500);
        for refused in [
            NextIdError::NotReady { reason: "starting" },
            NextIdError::ClockDriftTryLater { drift },
            NextIdError::ClockDriftTooLarge { drift },
        ] {
            let error = Error::from(refused);
            assert_eq!(error.to_string(), refused.to_string());
            assert_eq!(error.is_retryable(), refused.is_retryable(), "{refused:?}");
            assert_eq!(error.error_type(), refused.error_type());
            match (refused, error) {
                (NextIdError::NotReady { reason }, Error::NotReady { reason: owned }) => {
                    assert_eq!(reason, owned)
                }
                (
                    NextIdError::ClockDriftTryLater { drift: a },
                    Error::ClockDriftTryLater { drift: b },
                )
                | (
                    NextIdError::ClockDriftTooLarge { drift: a },
                    Error::ClockDriftTooLarge { drift: b },
                ) => {
                    assert_eq!(a, b)
                }
                (refused, error) => panic!("{refused:?} became {error:?}"),
            }
        }
        assert!(!NextIdError::ClockDriftTooLarge { drift }.is_retryable());
    }
}
