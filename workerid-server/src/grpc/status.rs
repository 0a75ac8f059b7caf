//! gRPC statuses: every failure as the status its kind calls for, with this
//! server's stable error code in the `workerid-code` metadata and a message
//! fit for clients (store details go to the log only).

use tonic::{Code, Status};

use crate::routes::{self, Failure};

pub use workerid_proto::CODE_KEY;

/// A status of `code` with the stable error code `workerid_code`.
pub fn status(code: Code, workerid_code: &'static str, msg: impl Into<String>) -> Status {
    let mut status = Status::new(code, msg);
    status.metadata_mut().insert(
        CODE_KEY,
        tonic::metadata::MetadataValue::from_static(workerid_code),
    );
    status
}

/// Bad input: `INVALID_ARGUMENT`.
pub fn invalid(workerid_code: &'static str, msg: impl Into<String>) -> Status {
    status(Code::InvalidArgument, workerid_code, msg)
}

/// A failure to serve IDs, with the code and message the HTTP API gives it.
pub fn of_failure(e: &Failure) -> Status {
    let (workerid_code, msg) = routes::public(e);
    let code = match workerid_code {
        "unknown_tag" => Code::NotFound,
        "invalid_tag" => Code::InvalidArgument,
        "tag_exhausted" => Code::ResourceExhausted,
        "shutting_down" | "store_unavailable" | "not_ready" | "clock_drift" => Code::Unavailable,
        _ => Code::Internal,
    };
    status(code, workerid_code, msg)
}

/// A failure of a lease call.
pub fn of_lease_error(e: &workerid::Error) -> Status {
    use workerid::Error as E;
    let (code, workerid_code) = match e {
        E::NoAvailableId { .. } => (Code::ResourceExhausted, "no_available_id"),
        E::InvalidWorkerId { .. } => (Code::InvalidArgument, "invalid_worker_id"),
        E::TokenMismatch { .. } => (Code::FailedPrecondition, "token_mismatch"),
        E::TokenExpired { .. } => (Code::FailedPrecondition, "token_expired"),
        E::NotAssigned { .. } => (Code::FailedPrecondition, "not_assigned"),
        E::InvalidToken { .. } => (Code::InvalidArgument, "invalid_token"),
        E::InvalidConfig { .. } => (Code::InvalidArgument, "invalid_config"),
        E::ConfigMismatch { stored, .. } => {
            let mut refused = status(Code::FailedPrecondition, "config_mismatch", e.to_string());
            refused
                .metadata_mut()
                .insert(workerid_proto::STORED_KEY, (*stored).into());
            return refused;
        }
        E::NamespaceInUse { live, .. } => {
            let mut refused = status(Code::FailedPrecondition, "namespace_in_use", e.to_string());
            refused
                .metadata_mut()
                .insert(workerid_proto::LIVE_KEY, (*live).into());
            return refused;
        }
        E::Unsupported { .. } => (Code::Unimplemented, "unsupported"),
        E::Unavailable { .. } => {
            tracing::warn!(code = "store_unavailable", "lease call failed: {e}");
            return status(Code::Unavailable, "store_unavailable", "store unavailable");
        }
        _ => {
            tracing::warn!(code = "internal", "lease call failed: {e}");
            return status(Code::Internal, "internal", "internal error");
        }
    };
    // The error's own words name only what the caller sent (IDs, pool
    // sizes, the namespace), never the store.
    status(code, workerid_code, e.to_string())
}

/// A failure of a segment store call.
pub fn of_segment_error(e: &workerid::segment::Error) -> Status {
    use workerid::segment::Error as E;
    let (code, workerid_code) = match e {
        E::UnknownTag { .. } => (Code::NotFound, "unknown_tag"),
        E::TagExhausted { .. } => (Code::ResourceExhausted, "tag_exhausted"),
        E::InvalidConfig { .. } => (Code::InvalidArgument, "invalid_config"),
        E::Unsupported { .. } => (Code::Unimplemented, "unsupported"),
        E::Stopped { .. } => (Code::Unavailable, "shutting_down"),
        E::Unavailable { .. } => {
            tracing::warn!(code = "store_unavailable", "segment call failed: {e}");
            return status(Code::Unavailable, "store_unavailable", "store unavailable");
        }
        _ => {
            tracing::warn!(code = "internal", "segment call failed: {e}");
            return status(Code::Internal, "internal", "internal error");
        }
    };
    status(code, workerid_code, e.to_string())
}

/// The HTTP status a gRPC status stands for in the request metrics (one
/// `status` label for both APIs).
pub fn http_equivalent(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::InvalidArgument | Code::OutOfRange => 400,
        Code::Unauthenticated => 401,
        Code::PermissionDenied => 403,
        Code::NotFound => 404,
        Code::FailedPrecondition | Code::AlreadyExists | Code::Aborted => 409,
        Code::ResourceExhausted => 429,
        Code::Cancelled => 499,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::DeadlineExceeded => 504,
        _ => 500,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_failure_names_no_store_detail() {
        let e =
            workerid::Error::unavailable("redis", "connect to redis://:hunter2@10.0.0.1 failed");
        let status = of_lease_error(&e);
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(status.message(), "store unavailable");
        assert!(!format!("{status:?}").contains("hunter2"));
        assert_eq!(
            status.metadata().get(CODE_KEY).unwrap(),
            "store_unavailable"
        );
    }

    #[test]
    fn refusals_keep_their_kind() {
        let id = workerid::WorkerId::from(3);
        let status = of_lease_error(&workerid::Error::TokenMismatch { id });
        assert_eq!(status.code(), Code::FailedPrecondition);
        assert_eq!(status.metadata().get(CODE_KEY).unwrap(), "token_mismatch");
        let full = of_lease_error(&workerid::Error::NoAvailableId { max_worker_id: 1 });
        assert_eq!(full.code(), Code::ResourceExhausted);
    }
}
