//! What can go wrong with segment IDs.

/// The boxed cause carried by [`Error::Unavailable`] (the core's).
pub use workerid_core::BoxError;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with segment IDs: the errors of
/// [`SegmentStore`](crate::SegmentStore) and of the allocators over it. Which
/// are worth retrying: [`Error::is_retryable`].
///
/// Input errors ([`Error::InvalidConfig`]) are raised before any I/O and
/// change nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No segment tag of that name exists.
    #[error("unknown tag {tag:?}")]
    UnknownTag {
        /// The tag.
        tag: String,
    },

    /// The tag's counter would pass the largest ID (2^63 - 1).
    #[error("tag {tag:?} is exhausted: its next range would pass 2^63 - 1")]
    TagExhausted {
        /// The tag.
        tag: String,
    },

    /// A bad tag name, step, first ID or batch size.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong, naming the value.
        reason: String,
    },

    /// The allocator was shut down and hands out nothing more.
    #[error("segment allocator stopped: {reason}")]
    Stopped {
        /// Why.
        reason: String,
    },

    /// The store does not implement this optional operation (see
    /// [`SegmentCapabilities`](crate::SegmentCapabilities)). Not retryable.
    #[error("the store does not support {operation}")]
    Unsupported {
        /// The operation, e.g. `"list_tags"`.
        operation: &'static str,
    },

    /// The store could not be reached, timed out, or answered nonsense.
    ///
    /// A reservation may or may not have taken effect; retrying is safe (a
    /// range reserved but not seen is skipped, never handed out twice).
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
    /// let err = workerid_segment::Error::unavailable("redis", "connection refused");
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

    /// Whether retrying the same call can succeed: only [`Error::Unavailable`].
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }
}

/// A store's shared plumbing answers lease errors; on a segment call the
/// ones that can occur keep their meaning, and any other is an answer that
/// makes no sense for a segment, which the contract calls unavailable.
impl From<workerid_core::Error> for Error {
    fn from(e: workerid_core::Error) -> Self {
        match e {
            workerid_core::Error::Unavailable { store, source } => {
                Error::Unavailable { store, source }
            }
            workerid_core::Error::InvalidConfig { reason } => Error::InvalidConfig { reason },
            workerid_core::Error::Unsupported { operation } => Error::Unsupported { operation },
            other => Error::unavailable("store", other),
        }
    }
}

impl workerid_core::observe::ErrorType for Error {
    fn error_type(&self) -> &'static str {
        match self {
            Error::UnknownTag { .. } => "unknown_tag",
            Error::TagExhausted { .. } => "tag_exhausted",
            Error::InvalidConfig { .. } => "invalid_config",
            Error::Stopped { .. } => "stopped",
            Error::Unsupported { .. } => "unsupported",
            Error::Unavailable { .. } => "unavailable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_error_keeps_its_meaning_where_it_has_one() {
        let e: Error = workerid_core::Error::unavailable("redis", "refused").into();
        assert!(matches!(e, Error::Unavailable { store: "redis", .. }));
        let e: Error = workerid_core::Error::invalid_config("bad prefix").into();
        assert!(matches!(e, Error::InvalidConfig { ref reason } if reason == "bad prefix"));
        let e: Error = workerid_core::Error::Unsupported { operation: "list" }.into();
        assert!(matches!(e, Error::Unsupported { operation: "list" }));
        let e: Error = workerid_core::Error::NoAvailableId { max_worker_id: 3 }.into();
        assert!(e.is_retryable(), "{e}");
    }
}
