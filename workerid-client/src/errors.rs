//! The server's refusals as the typed errors a store in the process gives.

use tonic::{Code, Status};
use workerid_core::{Error, WorkerId};
use workerid_proto::{CODE_KEY, LIVE_KEY, STORED_KEY};

/// The store name errors carry.
const STORE: &str = "workerid-server";

/// What the failed call was about, for errors that name it.
#[derive(Default)]
pub(crate) struct About<'a> {
    pub namespace: &'a str,
    pub id: Option<WorkerId>,
    pub max_worker_id: u32,
    pub operation: &'static str,
}

pub(crate) fn metadata<'a>(status: &'a Status, key: &str) -> Option<&'a str> {
    status.metadata().get(key).and_then(|v| v.to_str().ok())
}

fn number(status: &Status, key: &str) -> Option<u32> {
    metadata(status, key).and_then(|v| v.parse().ok())
}

/// What a transport failure says, without the URL's credentials (a gRPC
/// URL carries none) or the whole error chain.
pub(crate) fn transport_reason(e: &tonic::transport::Error) -> String {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        reason = format!("{reason}: {cause}");
        source = cause.source();
    }
    reason
}

/// A lease call's failure.
pub(crate) fn lease_error(status: &Status, about: &About<'_>) -> Error {
    let id = || about.id.unwrap_or(WorkerId::from(0));
    let message = status.message().to_owned();
    match (status.code(), metadata(status, CODE_KEY)) {
        (_, Some("no_available_id")) => Error::NoAvailableId {
            max_worker_id: about.max_worker_id,
        },
        (_, Some("token_mismatch")) => Error::TokenMismatch { id: id() },
        (_, Some("token_expired")) => Error::TokenExpired { id: id() },
        (_, Some("not_assigned")) => Error::NotAssigned { id: id() },
        (_, Some("invalid_worker_id")) if about.id.is_some() => Error::InvalidWorkerId {
            id: u64::from(id().get()),
            max_worker_id: about.max_worker_id,
        },
        (_, Some("invalid_token")) => Error::InvalidToken {
            reason: "the server refused the token",
        },
        (_, Some("config_mismatch")) => Error::ConfigMismatch {
            namespace: about.namespace.to_owned(),
            stored: number(status, STORED_KEY).unwrap_or(0),
            requested: about.max_worker_id,
        },
        (_, Some("namespace_in_use")) => Error::NamespaceInUse {
            namespace: about.namespace.to_owned(),
            live: number(status, LIVE_KEY).unwrap_or(0),
        },
        (_, Some("unsupported")) => Error::Unsupported {
            operation: about.operation,
        },
        (Code::InvalidArgument, _) => Error::invalid_config(message),
        (Code::Unauthenticated, _) => {
            Error::invalid_config(format!("the server refused the bearer token: {message}"))
        }
        // Unreachable, restarting, timed out, or a failure of the store
        // behind it: the call may or may not have taken effect.
        _ => Error::unavailable(STORE, format!("{:?}: {message}", status.code())),
    }
}

/// A segment call's failure.
pub(crate) fn segment_error(
    status: &Status,
    tag: &str,
    operation: &'static str,
) -> workerid_segment::Error {
    use workerid_segment::Error as E;
    let message = status.message().to_owned();
    match (status.code(), metadata(status, CODE_KEY)) {
        (_, Some("unknown_tag")) => E::UnknownTag {
            tag: tag.to_owned(),
        },
        (_, Some("tag_exhausted")) => E::TagExhausted {
            tag: tag.to_owned(),
        },
        (_, Some("unsupported")) => E::Unsupported { operation },
        (Code::InvalidArgument, _) => E::invalid_config(message),
        (Code::Unauthenticated, _) => {
            E::invalid_config(format!("the server refused the bearer token: {message}"))
        }
        _ => E::unavailable(STORE, format!("{:?}: {message}", status.code())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: Code, workerid_code: &'static str) -> Status {
        let mut status = Status::new(code, "refused");
        status
            .metadata_mut()
            .insert(CODE_KEY, workerid_code.parse().unwrap());
        status
    }

    #[test]
    fn refusals_come_back_typed() {
        let about = About {
            namespace: "ns",
            id: Some(WorkerId::from(3)),
            max_worker_id: 7,
            operation: "renew",
        };
        let error = |code, workerid_code| lease_error(&refusal(code, workerid_code), &about);
        assert!(matches!(
            error(Code::FailedPrecondition, "token_mismatch"),
            Error::TokenMismatch { id } if id == WorkerId::from(3)
        ));
        assert!(matches!(
            error(Code::ResourceExhausted, "no_available_id"),
            Error::NoAvailableId { max_worker_id: 7 }
        ));
        let mut mismatch = refusal(Code::FailedPrecondition, "config_mismatch");
        mismatch
            .metadata_mut()
            .insert(STORED_KEY, "15".parse().unwrap());
        assert!(matches!(
            lease_error(&mismatch, &about),
            Error::ConfigMismatch {
                stored: 15,
                requested: 7,
                ..
            }
        ));
        assert!(matches!(
            error(Code::InvalidArgument, "invalid_ttl"),
            Error::InvalidConfig { .. }
        ));
    }

    #[test]
    fn anything_else_is_unavailable() {
        let about = About::default();
        for status in [
            refusal(Code::Unavailable, "store_unavailable"),
            refusal(Code::Internal, "internal"),
            Status::new(Code::Unknown, "transport error"),
            Status::new(Code::DeadlineExceeded, "timeout"),
        ] {
            assert!(lease_error(&status, &about).is_retryable(), "{status:?}");
            assert!(segment_error(&status, "t", "reserve").is_retryable());
        }
        assert!(matches!(
            segment_error(&refusal(Code::NotFound, "unknown_tag"), "orders", "reserve"),
            workerid_segment::Error::UnknownTag { tag } if tag == "orders"
        ));
    }
}
