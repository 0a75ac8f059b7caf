//! What can go wrong in the CLI, and the exit code of each: scripts can rely
//! on them.

use workerid::segment::Error as SegmentError;
use workerid::snowflake::Error as SnowflakeError;
use workerid::{Error, FailureCause, OpenError};

/// Exit codes of the `workerid` binary.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// Any other failure (the store answered an error not listed below, the
    /// output could not be written).
    pub const FAILED: u8 = 1;
    /// Bad usage: an unknown flag, a missing argument, a bad URL, namespace,
    /// worker ID, tag or layout. Nothing was changed.
    pub const USAGE: u8 = 2;
    /// The store cannot be reached, timed out, or answered nonsense.
    pub const UNREACHABLE: u8 = 3;
    /// No such database (in the store), namespace (no worker ID was ever
    /// granted in it) or tag.
    pub const UNKNOWN: u8 = 4;
    /// Refused, nothing changed: a forced release without `--force`, a tag
    /// that exists already.
    pub const REFUSED: u8 = 5;
    /// The store cannot do this: a store without listing.
    pub const UNSUPPORTED: u8 = 6;
    /// The store denied access (user, password, certificate, a grant).
    pub const ACCESS_DENIED: u8 = 7;
    /// Something answered at the address, but not that kind of store (or
    /// not over TLS when the URL asks for it).
    pub const WRONG_PROTOCOL: u8 = 8;
    /// Stopped by Ctrl-C (SIGINT), after cleaning up: 128 + the signal's
    /// number, as shells report it.
    pub const INTERRUPTED: u8 = 130;
}

/// An error of the `workerid` binary; [`CliError::exit_code`] says how it exits.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad usage (exit 2).
    #[error("{0}")]
    Usage(String),

    /// A store URL the CLI cannot use (exit 2).
    #[error("bad store URL {url:?}: {reason}")]
    BadUrl {
        /// The URL, password hidden.
        url: String,
        /// What is wrong.
        reason: String,
    },

    /// The store cannot be reached (exit 3).
    #[error("cannot reach the store at {url}: {reason}")]
    Unreachable {
        /// The URL, password hidden.
        url: String,
        /// Why.
        reason: String,
    },

    /// A namespace in which no worker ID was ever granted (exit 4).
    #[error("unknown namespace {0:?}: no worker ID was ever granted in it on this store")]
    UnknownNamespace(String),

    /// Refused; nothing changed (exit 5).
    #[error("{0}")]
    Refused(String),

    /// The store does not implement an optional operation (exit 6).
    #[error("the {store} store cannot {operation}")]
    Unsupported {
        /// Which store.
        store: &'static str,
        /// What it cannot do.
        operation: &'static str,
    },

    /// The store could not be opened (exit 2 for a bad or unusable URL, 3
    /// when it does not answer, 5 when it refuses).
    #[error(transparent)]
    Open(OpenError),

    /// An error of the lease store (exit code by kind).
    #[error(transparent)]
    Store(#[from] Error),

    /// An error of the segment store (exit code by kind).
    #[error(transparent)]
    Segment(#[from] SegmentError),

    /// A bad snowflake layout (exit 2).
    #[error(transparent)]
    Snowflake(#[from] SnowflakeError),

    /// Stopped by Ctrl-C, after cleaning up (exit 130).
    #[error("interrupted: {0}")]
    Interrupted(String),

    /// The output could not be written or encoded (exit 1).
    #[error("cannot write the output: {0}")]
    Output(String),
}

impl CliError {
    /// The exit code: one of [`exit`]'s constants.
    ///
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::BadUrl { .. } => exit::USAGE,
            CliError::Unreachable { .. } => exit::UNREACHABLE,
            CliError::UnknownNamespace(_) => exit::UNKNOWN,
            CliError::Refused(_) => exit::REFUSED,
            CliError::Unsupported { .. } => exit::UNSUPPORTED,
            CliError::Output(_) => exit::FAILED,
            CliError::Interrupted(_) => exit::INTERRUPTED,
            CliError::Open(e) => match e {
                OpenError::Unreachable { .. } => exit::UNREACHABLE,
                OpenError::AccessDenied { .. } => exit::ACCESS_DENIED,
                OpenError::NotFound { .. } => exit::UNKNOWN,
                OpenError::WrongProtocol { .. } => exit::WRONG_PROTOCOL,
                OpenError::Refused { .. } => exit::REFUSED,
                _ => exit::USAGE,
            },
            CliError::Store(e) => match e {
                Error::Unavailable { .. } => unavailable(FailureCause::of(e)),
                Error::InvalidConfig { .. }
                | Error::InvalidWorkerId { .. }
                | Error::InvalidToken { .. } => exit::USAGE,
                Error::Unsupported { .. } => exit::UNSUPPORTED,
                _ => exit::FAILED,
            },
            CliError::Segment(e) => match e {
                SegmentError::Unavailable { .. } => unavailable(FailureCause::of_segment(e)),
                SegmentError::InvalidConfig { .. } => exit::USAGE,
                SegmentError::UnknownTag { .. } => exit::UNKNOWN,
                SegmentError::Unsupported { .. } => exit::UNSUPPORTED,
                _ => exit::FAILED,
            },
            CliError::Snowflake(e) => match e {
                SnowflakeError::InvalidConfig { .. } => exit::USAGE,
                _ => exit::FAILED,
            },
        }
    }
}

/// The exit code of a store call answered `Unavailable`: a grant missing
/// is access denied (7), which no retry mends, not the store down (3).
fn unavailable(cause: Option<FailureCause>) -> u8 {
    match cause {
        Some(FailureCause::AccessDenied) => exit::ACCESS_DENIED,
        Some(FailureCause::WrongProtocol) => exit::WRONG_PROTOCOL,
        Some(FailureCause::NotFound) => exit::UNKNOWN,
        _ => exit::UNREACHABLE,
    }
}

impl CliError {
    /// A short, stable name of the error's kind, for `--json` output.
    pub fn kind(&self) -> &'static str {
        match self.exit_code() {
            exit::USAGE => "usage",
            exit::UNREACHABLE => "unreachable",
            exit::UNKNOWN => "unknown",
            exit::REFUSED => "refused",
            exit::UNSUPPORTED => "unsupported",
            exit::ACCESS_DENIED => "access_denied",
            exit::WRONG_PROTOCOL => "wrong_protocol",
            exit::INTERRUPTED => "interrupted",
            _ => "failed",
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e.to_string())
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        CliError::Output(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_grant_is_access_denied_not_the_store_down() {
        for said in [
            "error returned from database: permission denied for table workerid_leases",
            "error returned from database: (code: 1142) UPDATE command denied to user 'ro'@'localhost'",
            "NOPERM User ro has no permissions to run the 'evalsha' command",
            "etcdserver: permission denied",
        ] {
            let lease = CliError::Store(Error::unavailable("store", said));
            assert_eq!(lease.exit_code(), exit::ACCESS_DENIED, "{said}");
            assert_eq!(lease.kind(), "access_denied");
            let segment = CliError::Segment(SegmentError::unavailable("store", said));
            assert_eq!(segment.exit_code(), exit::ACCESS_DENIED, "{said}");
        }
        let down = CliError::Store(Error::unavailable(
            "redis",
            "Connection refused (os error 111)",
        ));
        assert_eq!(down.exit_code(), exit::UNREACHABLE);
    }
}
