//! The operator's gRPC calls (a forced release, a namespace removed, a tag
//! created) take the operator token alone when one is set, while every
//! other call takes either token: a client holding the service's token
//! cannot free the server's own worker ID.

mod common;

use std::time::Duration;

use common::{launch_with_grpc, Launch};
use tonic::{Code, Request};
use workerid_proto::v1::leases_client::LeasesClient;
use workerid_proto::v1::segments_client::SegmentsClient;
use workerid_proto::v1::{
    AcquireRequest, CreateTagRequest, ForceReleaseRequest, RemoveNamespaceRequest,
};

/// `message` carrying `token` as its bearer token, if any.
fn with<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().expect("metadata");
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// The call's outcome: done, or the status code.
fn code<T>(answer: Result<T, tonic::Status>) -> Result<(), Code> {
    answer.map(drop).map_err(|s| s.code())
}

#[tokio::test(flavor = "multi_thread")]
async fn operator_calls_take_the_operator_token_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (server, grpc) = launch_with_grpc(
        dir.path(),
        &Launch {
            top: "auth_token = \"service\"\noperator_token = \"operator\"\n",
            ..Launch::default()
        },
    );
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{grpc}"))
        .unwrap()
        .timeout(Duration::from_secs(30));
    let channel = endpoint.connect().await.expect("the gRPC port");
    let mut leases = LeasesClient::new(channel.clone());
    let mut segments = SegmentsClient::new(channel);
    let force = || ForceReleaseRequest {
        namespace: "workerid-server".into(),
        worker_id: 0,
    };

    // The server's own worker ID: not with the service's token, nor none.
    assert_eq!(
        code(leases.force_release(with(force(), None)).await),
        Err(Code::Unauthenticated)
    );
    assert_eq!(
        code(leases.force_release(with(force(), Some("service"))).await),
        Err(Code::PermissionDenied)
    );
    let create = || CreateTagRequest {
        tag: "made-by-ops".into(),
        first_id: 1,
        step: 100,
    };
    assert_eq!(
        code(segments.create_tag(with(create(), Some("service"))).await),
        Err(Code::PermissionDenied)
    );
    let remove = || RemoveNamespaceRequest {
        namespace: "nobody-here".into(),
    };
    assert_eq!(
        code(
            leases
                .remove_namespace(with(remove(), Some("service")))
                .await
        ),
        Err(Code::PermissionDenied)
    );
    assert_eq!(server.get("/readyz").0, 200, "the worker kept its lease");

    // A first range past the largest ID is refused, whoever asks.
    let too_far = CreateTagRequest {
        tag: "too-far".into(),
        first_id: (1 << 63) - 1,
        step: 2,
    };
    let refused = segments
        .create_tag(with(too_far, Some("operator")))
        .await
        .expect_err("the first range does not fit");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");

    // With the operator's token: done.
    assert_eq!(
        code(segments.create_tag(with(create(), Some("operator"))).await),
        Ok(())
    );
    assert_eq!(
        code(
            leases
                .remove_namespace(with(remove(), Some("operator")))
                .await
        ),
        Ok(())
    );
    let released = leases
        .force_release(with(force(), Some("operator")))
        .await
        .expect("a forced release")
        .into_inner();
    assert!(released.released, "the server's worker ID was held");

    // Every other call takes either token.
    let acquire = |token| {
        with(
            AcquireRequest {
                namespace: "clients".into(),
                max_worker_id: 3,
                token: workerid::Token::generate().to_string(),
                ttl_ms: 10_000,
                holder: "client-1".into(),
            },
            Some(token),
        )
    };
    for token in ["service", "operator"] {
        let acquired = leases.acquire(acquire(token)).await;
        assert!(acquired.is_ok(), "{token}: {acquired:?}");
    }
    assert!(server.terminate().success());
}
