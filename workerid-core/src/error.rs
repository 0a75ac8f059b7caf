//! The one error type of the lease contract.

use std::time::Duration;

use crate::WorkerId;

/// The boxed cause carried by [`Error::Unavailable`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when leasing worker IDs.
///
/// The first six variants are libx.net/workerid's error list (`ErrNoAvailableID`,
/// `ErrInvalidWorkerID`, `ErrTokenMismatch`, `ErrTokenExpired`, `ErrNotAssigned`,
/// `ErrInvalidToken`). Which are worth retrying: [`Error::is_retryable`]. The
/// snowflake and segment crates have errors of their own.
///
/// Input errors ([`Error::InvalidWorkerId`], [`Error::InvalidToken`],
/// [`Error::InvalidConfig`]) are raised before any I/O and change nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Every worker ID of the pool is held by a live lease.
    #[error("no available worker IDs: all of 0..={max_worker_id} are held")]
    NoAvailableId {
        /// The largest worker ID of the pool.
        max_worker_id: u32,
    },

    /// A worker ID outside `0..=max_worker_id`.
    #[error("invalid worker ID {id}: the pool holds 0..={max_worker_id}")]
    InvalidWorkerId {
        /// The ID that was given.
        id: u64,
        /// The largest worker ID of the pool.
        max_worker_id: u32,
    },

    /// The worker ID is held (live or expired) by another token.
    #[error("token mismatch: worker ID {id} is held by another token")]
    TokenMismatch {
        /// The worker ID.
        id: WorkerId,
    },

    /// The lease of this token has expired (and was not granted again since).
    #[error("token expired: the lease on worker ID {id} has expired")]
    TokenExpired {
        /// The worker ID.
        id: WorkerId,
    },

    /// The worker ID was never granted, or has been released.
    #[error("worker ID {id} is not assigned")]
    NotAssigned {
        /// The worker ID.
        id: WorkerId,
    },

    /// A token string that is not 22 URL-safe base64 characters encoding 16 bytes.
    #[error("invalid token format: {reason}")]
    InvalidToken {
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A bad namespace, option or ttl.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong, naming the value.
        reason: String,
    },

    /// The namespace was first used with another pool size.
    ///
    /// Two deployments that disagree on the pool size would hand out
    /// overlapping layouts, so the store refuses and changes nothing.
    #[error(
        "configuration mismatch: namespace {namespace:?} was created with max_worker_id \
         {stored}, but this client asks for max_worker_id {requested}"
    )]
    ConfigMismatch {
        /// The namespace.
        namespace: String,
        /// The `max_worker_id` the store remembers.
        stored: u32,
        /// The `max_worker_id` this client was configured with.
        requested: u32,
    },

    /// A namespace cannot be removed while a live lease holds one of its IDs.
    #[error("namespace {namespace:?} is in use: {live} of its worker IDs are held by live leases")]
    NamespaceInUse {
        /// The namespace.
        namespace: String,
        /// How many of its IDs live leases hold.
        live: u32,
    },

    /// The store does not implement this optional operation (see
    /// [`Capabilities`](crate::Capabilities)). Not retryable.
    #[error("the store does not support {operation}")]
    Unsupported {
        /// The operation, e.g. `"list"`.
        operation: &'static str,
    },

    /// The store could not be reached, timed out, or answered nonsense.
    ///
    /// The operation may or may not have taken effect; retrying is safe
    /// (a grant that was made but not seen simply expires).
    #[error("store {store} unavailable: {source}")]
    Unavailable {
        /// Which store (e.g. `"redis"`).
        store: &'static str,
        /// The underlying cause.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// Builds [`Error::Unavailable`] from any error or message.
    ///
    /// ```
    /// let err = workerid_core::Error::unavailable("redis", "connection refused");
    /// assert!(err.is_retryable());
    /// ```
    pub fn unavailable(store: &'static str, cause: impl Into<BoxError>) -> Self {
        Error::Unavailable {
            store,
            source: cause.into(),
        }
    }

    /// Builds [`Error::InvalidConfig`].
    pub fn invalid_config(reason: impl Into<String>) -> Self {
        Error::InvalidConfig {
            reason: reason.into(),
        }
    }

    pub(crate) fn timed_out(store: &'static str, after: Duration) -> Self {
        Error::unavailable(store, format!("no answer within {after:?}"))
    }

    /// Whether retrying the same call can succeed: only [`Error::Unavailable`].
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }

    /// Whether this error means the caller no longer holds the lease it
    /// named ([`Error::TokenMismatch`], [`Error::TokenExpired`],
    /// [`Error::NotAssigned`]): stop using the worker ID at once.
    pub fn is_lease_lost(&self) -> bool {
        matches!(
            self,
            Error::TokenMismatch { .. } | Error::TokenExpired { .. } | Error::NotAssigned { .. }
        )
    }
}
