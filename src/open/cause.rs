//! Why a store could not be opened, told apart by what its driver said.

use workerid_core::Error;

/// Items only a build with a store driver (whose words are read) uses.
macro_rules! with_drivers {
    ($($item:item)*) => {$(
        #[cfg(any(
            feature = "redis",
            feature = "etcd",
            feature = "postgres",
            feature = "mysql",
            feature = "sqlite"
        ))]
        $item
    )*};
}

with_drivers! {
    use crate::store_url::StoreUrl;
    use crate::OpenError;
}

/// What the driver's words show, in the order they are checked: the first
/// list that has a phrase in the (lower-cased) message wins.
const CAUSES: [(Cause, &[&str]); 4] = [
    (
        Cause::AccessDenied,
        &[
            "password authentication failed", // PostgreSQL
            "(28p01)",
            "(28000)",
            "access denied for user", // MySQL, MariaDB
            "wrongpass",              // Redis
            "noauth",
            "noperm", // Redis: an ACL without the command or key
            "invalid username-password pair",
            "authentication failed", // etcd, Redis
            "authentication required",
            "invalid auth token",
            "user name is empty",
            "permission denied",
            "command denied to user", // MySQL, MariaDB: a grant missing
            "role \"",                // PostgreSQL: role "x" does not exist
        ],
    ),
    (
        Cause::NotFound,
        &[
            "(3d000)", // PostgreSQL: invalid catalog name
            "database \"",
            "unknown database", // MySQL, MariaDB
            "db index is out of range",
            "invalid db index",
            "unable to open database file", // SQLite
            "not initialised",
        ],
    ),
    (
        Cause::WrongProtocol,
        &[
            "protocol error",
            "parse error",
            "unexpected response",
            "invalid response",
            "unexpected message",
            "received invalid",
            "frame with invalid size",
            "http2 error",
            "h2 protocol",
            "invalid http version",
            "received corrupt message",
            "unexpected eof",
            "wrong version number",
            "invalid content type",
            "corrupt message",
            "packet out of order",
            "does not support tls", // sqlx: TLS asked of a server without it
        ],
    ),
    (
        Cause::Busy,
        &[
            "lock wait timeout exceeded", // MySQL, MariaDB
            "due to lock timeout",        // PostgreSQL
        ],
    ),
];

/// What a store's `Unavailable` answer was, told apart by its driver's
/// words, as [`open`](crate::open) tells its errors apart: for the calls
/// after it, where a grant revoked or a table locked reads `Unavailable`
/// like a server down.
///
/// ```
/// use workerid::{Error, FailureCause};
/// let denied = Error::unavailable("postgres", "permission denied for table workerid_leases");
/// assert_eq!(FailureCause::of(&denied), Some(FailureCause::AccessDenied));
/// let down = Error::unavailable("redis", "Connection refused (os error 111)");
/// assert_eq!(FailureCause::of(&down), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureCause {
    /// The store refused this user (a password, a missing grant or ACL):
    /// no retry mends it.
    AccessDenied,
    /// No such database (or it has not been set up).
    NotFound,
    /// Something answered that is not this kind of store, or not over TLS.
    WrongProtocol,
    /// It answered, but a lock it waited for was held past its timeout.
    Busy,
}

use FailureCause as Cause;

impl FailureCause {
    /// The cause of a lease call's [`Error::Unavailable`]; `None` for any
    /// other error, or one whose words say nothing more (a connection
    /// refused, a timeout).
    pub fn of(error: &Error) -> Option<FailureCause> {
        match error {
            Error::Unavailable { source, .. } => cause_of(&source_chain(source.as_ref())),
            _ => None,
        }
    }

    /// As [`FailureCause::of`], for a segment call's error.
    pub fn of_segment(error: &workerid_segment::Error) -> Option<FailureCause> {
        match error {
            workerid_segment::Error::Unavailable { source, .. } => {
                cause_of(&source_chain(source.as_ref()))
            }
            _ => None,
        }
    }
}

fn cause_of(message: &str) -> Option<Cause> {
    let message = message.to_lowercase();
    CAUSES
        .iter()
        .find(|(_, phrases)| phrases.iter().any(|p| message.contains(p)))
        .map(|(cause, _)| *cause)
}

with_drivers! {
/// Maps a store's connect error to an [`OpenError`], password scrubbed.
pub(crate) fn connect_error(url: &StoreUrl, error: Error) -> OpenError {
    let said = match &error {
        Error::Unavailable { source, .. } => source_chain(source.as_ref()),
        Error::InvalidConfig { reason } => reason.clone(),
        other => other.to_string(),
    };
    let reason = url.scrub(&without_noise(&said));
    let (url_shown, kind) = (url.redacted.clone(), url.kind);
    match error {
        Error::Unavailable { .. } => match cause_of(&reason) {
            Some(Cause::AccessDenied) => OpenError::AccessDenied {
                url: url_shown,
                kind,
                reason,
            },
            Some(Cause::NotFound) => OpenError::NotFound {
                url: url_shown,
                kind,
                reason,
            },
            Some(Cause::WrongProtocol) => OpenError::WrongProtocol {
                url: url_shown,
                kind,
                reason,
            },
            Some(Cause::Busy) => OpenError::Refused {
                url: url_shown,
                kind,
                reason,
            },
            None => OpenError::Unreachable {
                url: url_shown,
                kind,
                reason,
            },
        },
        Error::InvalidConfig { .. } => url.bad(reason),
        _ => OpenError::Refused {
            url: url_shown,
            kind,
            reason,
        },
    }
}

/// A driver's message without what only its authors need: PostgreSQL's
/// " at line N" (the server's own source line).
fn without_noise(message: &str) -> String {
    let mut out = message.to_string();
    while let Some(at) = out.find(" at line ") {
        let digits = out[at + 9..]
            .chars()
            .take_while(char::is_ascii_digit)
            .count();
        if digits == 0 {
            break;
        }
        out.replace_range(at..at + 9 + digits, "");
    }
    out
}
}

/// An error and its causes, `: `-separated, each said once.
fn source_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut said = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !said.contains(&text) {
            said.push_str(": ");
            said.push_str(&text);
        }
        next = cause.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    with_drivers! {
    #[test]
    fn source_lines_are_dropped() {
        assert_eq!(
            without_noise("password authentication failed for user \"w\" at line 334"),
            "password authentication failed for user \"w\""
        );
        assert_eq!(without_noise("at line nine"), "at line nine");
    }
    }

    #[test]
    fn drivers_words_tell_the_cause() {
        for (said, cause) in [
            ("error returned from database: password authentication failed for user \"ops\"", Some(Cause::AccessDenied)),
            ("error returned from database: (code: 1045) Access denied for user 'ops'@'localhost'", Some(Cause::AccessDenied)),
            ("WRONGPASS: invalid username-password pair or user is disabled.", Some(Cause::AccessDenied)),
            ("error returned from database: database \"typo\" does not exist (3D000)", Some(Cause::NotFound)),
            ("error returned from database: (code: 1049) Unknown database 'typo'", Some(Cause::NotFound)),
            ("ERR DB index is out of range", Some(Cause::NotFound)),
            ("error returned from database: role \"typo\" does not exist", Some(Cause::AccessDenied)),
            ("error returned from database: database \"typo_db\" does not exist", Some(Cause::NotFound)),
            ("error returned from database: (code: 1142) CREATE command denied to user 'leaf'@'10.0.0.7' for table `db`.`workerid_leases`", Some(Cause::AccessDenied)),
            ("could not add the version column within 5 s (error returned from database: (code: 1205) Lock wait timeout exceeded; try restarting transaction)", Some(Cause::Busy)),
            ("error returned from database: canceling statement due to lock timeout", Some(Cause::Busy)),
            ("NOPERM User ops has no permissions to run the 'evalsha' command", Some(Cause::AccessDenied)),
            ("error returned from database: permission denied for table workerid_leases", Some(Cause::AccessDenied)),
            ("etcdserver: permission denied", Some(Cause::AccessDenied)),
            ("error occurred while attempting to establish a TLS connection: server does not support TLS", Some(Cause::WrongProtocol)),
            ("Connection refused (os error 111)", None),
            ("no answer within 3s", None),
        ] {
            assert_eq!(cause_of(said), cause, "{said}");
        }
    }
}
