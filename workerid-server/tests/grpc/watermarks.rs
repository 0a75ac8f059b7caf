//! In the server's own snowflake namespace a watermark is a time of the
//! server's layout in Unix milliseconds: a renewal or release with one in
//! another unit, or no time at all, is refused and changes nothing, so a
//! client's mistake can neither leave its IDs unprotected nor take a worker
//! ID out of the pool for good. Other namespaces keep their holders' own
//! meaning.

use std::time::{SystemTime, UNIX_EPOCH};

use tonic::transport::Channel;
use tonic::Code;
use workerid::Token;
use workerid_proto::v1::ids_client::IdsClient;
use workerid_proto::v1::leases_client::LeasesClient;
use workerid_proto::v1::{
    AcquireRequest, LayoutRequest, ListRequest, ReleaseRequest, RenewRequest,
};

use super::{channel, refused, start};

/// The state and watermark of `worker_id` in `namespace`.
async fn state(
    leases: &mut LeasesClient<Channel>,
    namespace: &str,
    worker_id: u32,
) -> (String, u64) {
    let request = ListRequest {
        namespace: namespace.into(),
        ..ListRequest::default()
    };
    let listing = leases.list(request).await.unwrap().into_inner();
    let lease = listing
        .leases
        .iter()
        .find(|l| l.worker_id == worker_id)
        .unwrap();
    (lease.state.clone(), lease.watermark)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watermark_the_layout_cannot_carry_is_refused_in_the_servers_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start(dir.path(), "");
    let channel = channel(port).await;
    let layout = IdsClient::new(channel.clone())
        .layout(LayoutRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut leases = LeasesClient::new(channel);
    let first_ms = layout.epoch_unix_ms;
    let last_ms = first_ms + (layout.unit_ms << layout.timestamp_bits);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let now_ms = u64::try_from(now.as_millis()).unwrap();

    let lease = |namespace: &str, max_worker_id: u32| {
        let token = Token::generate();
        let request = AcquireRequest {
            namespace: namespace.into(),
            max_worker_id,
            token: token.to_string(),
            ttl_ms: 10_000,
            holder: "watermark-test".into(),
        };
        (token, request)
    };
    let (token, acquire) = lease(&layout.namespace, layout.max_worker_id);
    let grant = leases.acquire(acquire).await.unwrap().into_inner();
    let renew = |watermark: u64| RenewRequest {
        namespace: layout.namespace.clone(),
        worker_id: grant.worker_id,
        token: token.to_string(),
        ttl_ms: 10_000,
        watermark,
    };
    let release = |watermark: u64| ReleaseRequest {
        namespace: layout.namespace.clone(),
        worker_id: grant.worker_id,
        token: token.to_string(),
        watermark,
    };
    let wrong = [
        ("seconds", now.as_secs()),
        ("microseconds", u64::try_from(now.as_micros()).unwrap()),
        ("nanoseconds", u64::try_from(now.as_nanos()).unwrap()),
        ("the largest value", u64::MAX),
        ("before the epoch", first_ms - 1),
        ("past the last timestamp", last_ms + 1),
    ];
    for (what, watermark) in wrong {
        let answer = leases.renew(renew(watermark)).await;
        let message = answer.as_ref().err().map(|s| s.message().to_string());
        refused(answer, Code::InvalidArgument, "invalid_watermark");
        let message = message.unwrap();
        assert!(
            message.contains(&first_ms.to_string()) && message.contains("Unix milliseconds"),
            "{what}: the refusal says what a watermark is: {message}"
        );
        refused(
            leases.release(release(watermark)).await,
            Code::InvalidArgument,
            "invalid_watermark",
        );
    }
    assert_eq!(
        state(&mut leases, &layout.namespace, grant.worker_id).await,
        ("live".to_string(), grant.previous_watermark),
        "the refused calls changed nothing: the lease is live, its watermark as granted"
    );

    // The bounds themselves are times of the layout, and 0 keeps the
    // stored watermark.
    leases.renew(renew(0)).await.unwrap();
    leases.renew(renew(now_ms + 5_000)).await.unwrap();
    leases.renew(renew(first_ms)).await.unwrap();
    assert_eq!(
        state(&mut leases, &layout.namespace, grant.worker_id)
            .await
            .1,
        now_ms + 5_000
    );
    leases.release(release(now_ms)).await.unwrap();
    assert_eq!(
        state(&mut leases, &layout.namespace, grant.worker_id).await,
        ("free".to_string(), now_ms)
    );

    // Elsewhere the watermark is the holders' own business.
    let (token, acquire) = lease("elsewhere", 3);
    let grant = leases.acquire(acquire).await.unwrap().into_inner();
    leases
        .renew(RenewRequest {
            namespace: "elsewhere".into(),
            worker_id: grant.worker_id,
            token: token.to_string(),
            ttl_ms: 10_000,
            watermark: u64::MAX,
        })
        .await
        .unwrap();
    leases
        .release(ReleaseRequest {
            namespace: "elsewhere".into(),
            worker_id: grant.worker_id,
            token: token.to_string(),
            watermark: 7,
        })
        .await
        .unwrap();
}
