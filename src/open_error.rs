//! Why a store could not be opened.

use crate::StoreKind;

/// Why [`open`](crate::open) failed. Every URL in it has its password
/// hidden ([`redact_url`](crate::redact_url)), and so does every message a
/// store's driver gave.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL's scheme names no store.
    #[error(
        "unknown store URL {url}: expected one of:\n{}",
        StoreKind::accepted_urls()
    )]
    UnknownScheme {
        /// The URL, password hidden.
        url: String,
    },

    /// The store is known, but this build of `workerid` leaves it out.
    #[error(
        "{url}: the {kind} store is not compiled in (enable the feature \"{feature}\" of the \
         workerid crate)"
    )]
    NotCompiledIn {
        /// The URL, password hidden.
        url: String,
        /// The store it names.
        kind: StoreKind,
        /// The feature that compiles it in.
        feature: &'static str,
    },

    /// The URL is malformed, or asks for something the store does not do.
    #[error("bad {kind} URL {url}: {reason}")]
    BadUrl {
        /// The URL, password hidden.
        url: String,
        /// The store it names.
        kind: StoreKind,
        /// What is wrong, naming the part of the URL.
        reason: String,
    },

    /// A file the URL names (a certificate, a key) cannot be read.
    #[error("{url}: cannot read {what} {path}: {reason}")]
    File {
        /// The URL, password hidden.
        url: String,
        /// Which file (`"CA certificate"`, ...).
        what: &'static str,
        /// Its path.
        path: String,
        /// The operating system's answer.
        reason: String,
    },

    /// The store did not answer, refused the connection, or its TLS
    /// handshake failed. Credentials it refuses are
    /// [`AccessDenied`](OpenError::AccessDenied).
    #[error("cannot reach the {kind} store at {url}: {reason}")]
    Unreachable {
        /// The URL, password hidden.
        url: String,
        /// The store it names.
        kind: StoreKind,
        /// The driver's words, password hidden.
        reason: String,
    },

    /// The store refused the credentials or what they may do: a wrong user
    /// or password, a missing client certificate, a missing grant.
    #[error("the {kind} store at {url} denied access: {reason}")]
    AccessDenied {
        /// The URL, password hidden.
        url: String,
        /// The store it names.
        kind: StoreKind,
        /// The driver's words, password hidden.
        reason: String,
    },

    /// The store answered, but what the URL names in it does not exist: a
    /// database, or a Redis database number out of range.
    #[error("the {kind} store at {url} has no such database: {reason}")]
    NotFound {
        /// The URL, password hidden.
        url: String,
        /// The store it names.
        kind: StoreKind,
        /// The driver's words, password hidden.
        reason: String,
    },

    /// Something answered at the address, but not that kind of store (or
    /// not over the protocol the scheme asks for, such as TLS).
    #[error("{url} does not answer as a {kind} store: {reason}")]
    WrongProtocol {
        /// The URL, password hidden.
        url: String,
        /// The store it names.
        kind: StoreKind,
        /// The driver's words, password hidden.
        reason: String,
    },

    /// The store answered, but refused to be used as configured (say, a
    /// Redis declared durable whose server does not keep writes).
    #[error("the {kind} store at {url} refused: {reason}")]
    Refused {
        /// The URL, password hidden.
        url: String,
        /// The store it names.
        kind: StoreKind,
        /// Its words, password hidden.
        reason: String,
    },
}

impl OpenError {
    /// The kind of store the URL named, when its scheme was known.
    pub fn kind(&self) -> Option<StoreKind> {
        match self {
            OpenError::UnknownScheme { .. } | OpenError::File { .. } => None,
            OpenError::NotCompiledIn { kind, .. }
            | OpenError::BadUrl { kind, .. }
            | OpenError::Unreachable { kind, .. }
            | OpenError::AccessDenied { kind, .. }
            | OpenError::NotFound { kind, .. }
            | OpenError::WrongProtocol { kind, .. }
            | OpenError::Refused { kind, .. } => Some(*kind),
        }
    }

    /// Whether the URL itself is at fault: an unknown scheme, a store this
    /// build leaves out, a malformed URL, or a file it names that cannot be
    /// read. No store was contacted; the URL has to change.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let err = workerid::open("redis://h:1/?durable=maybe").await.unwrap_err();
    /// assert!(err.is_bad_url());
    /// # }
    /// ```
    pub fn is_bad_url(&self) -> bool {
        matches!(
            self,
            OpenError::UnknownScheme { .. }
                | OpenError::NotCompiledIn { .. }
                | OpenError::BadUrl { .. }
                | OpenError::File { .. }
        )
    }

    /// Whether trying again later can help (the store did not answer).
    pub fn is_retryable(&self) -> bool {
        matches!(self, OpenError::Unreachable { .. })
    }
}
