//! The gRPC API of the real server: IDs one at a time, in batches and as a
//! stream, from the buffers the HTTP API serves too; `Decode`; the health
//! service, by what each service needs; leases with the library's contract (a resent acquire answered
//! with its own grant, fences, tokens) and watermarks checked in the
//! server's own namespace; the bearer token; and bad input
//! refused with the status that says so, changing nothing.

#[path = "grpc/by_hand.rs"]
mod by_hand;
mod common;
#[path = "grpc/give_back.rs"]
mod give_back;
#[path = "grpc/pages.rs"]
mod pages;
#[path = "grpc/watermarks.rs"]
mod watermarks;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use by_hand::{frame, read_frame, stream_ids_by_hand, ACK, PING};
use common::{sqlite, Launch, Server};
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{health_check_response::ServingStatus, HealthCheckRequest};
use workerid::Token;
use workerid_proto::v1::ids_client::IdsClient;
use workerid_proto::v1::leases_client::LeasesClient;
use workerid_proto::v1::segments_client::SegmentsClient;
use workerid_proto::v1::{
    AcquireRequest, CreateTagRequest, DecodeRequest, ForceReleaseRequest, IdRange, ListRequest,
    NextIdsRequest, NextSnowflakesRequest, ReleaseRequest, RenewRequest, StreamIdsRequest,
};

fn start(dir: &std::path::Path, top: &str) -> (Server, u16) {
    start_on(dir, dir, top)
}

/// A server with the gRPC port on the SQLite file in `store_dir`, its
/// config and log in `dir`.
fn start_on(dir: &std::path::Path, store_dir: &std::path::Path, top: &str) -> (Server, u16) {
    let grpc = workerid_testkit::free_port();
    let top = format!("grpc_listen = \"127.0.0.1:{grpc}\"\n{top}");
    let server = Server::launch(
        dir,
        &sqlite(store_dir),
        &Launch {
            top: &top,
            ..Launch::default()
        },
    );
    (server, grpc)
}

async fn channel(port: u16) -> Channel {
    // A unary call, or a stream's start, fails rather than waits without
    // end for a server that stopped answering.
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(30));
    for _ in 0..100 {
        if let Ok(channel) = endpoint.connect().await {
            return channel;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the gRPC port never answered");
}

/// The health service's answer for each of `services`.
async fn health<const N: usize>(
    port: u16,
    services: &[&'static str; N],
) -> [(&'static str, ServingStatus); N] {
    let mut client = HealthClient::new(channel(port).await);
    let mut answers = [("", ServingStatus::Unknown); N];
    for (answer, service) in answers.iter_mut().zip(services) {
        let status = client
            .check(HealthCheckRequest {
                service: (*service).into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status();
        *answer = (service, status);
    }
    answers
}

/// The stable error code of a refusal.
fn code_of(status: &Status) -> &str {
    status
        .metadata()
        .get("workerid-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn refused<T: std::fmt::Debug>(answer: Result<T, Status>, code: Code, workerid_code: &str) {
    let status = answer.expect_err("refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert_eq!(code_of(&status), workerid_code, "{status:?}");
}

fn range(first: u64, last: u64) -> IdRange {
    IdRange { first, last }
}

#[tokio::test(flavor = "multi_thread")]
async fn ids_come_from_the_same_buffers_as_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = start(dir.path(), "");
    let mut ids = IdsClient::new(channel(port).await);
    let batch = ids
        .next_ids(NextIdsRequest {
            tag: "test".into(),
            count: 5,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.ranges, vec![range(1, 5)]);
    assert_eq!(
        server.get("/alloc?biz_tag=test"),
        (200, r#"{"errno":0,"msg":"success","id":6}"#.into())
    );
    for count in [0, 10_001] {
        let answer = ids
            .next_ids(NextIdsRequest {
                tag: "test".into(),
                count,
            })
            .await;
        refused(answer, Code::InvalidArgument, "invalid_count");
    }
    let unknown = ids
        .next_ids(NextIdsRequest {
            tag: "nope".into(),
            count: 1,
        })
        .await;
    refused(unknown, Code::NotFound, "unknown_tag");
    let after = ids
        .next_ids(NextIdsRequest {
            tag: "test".into(),
            count: 1,
        })
        .await
        .unwrap();
    assert_eq!(
        after.into_inner().ranges,
        vec![range(7, 7)],
        "refusals took no ID"
    );

    let snowflakes = ids
        .next_snowflakes(NextSnowflakesRequest { count: 3 })
        .await
        .unwrap()
        .into_inner();
    let all: Vec<u64> = snowflakes
        .ranges
        .iter()
        .flat_map(|r| r.first..=r.last)
        .collect();
    assert_eq!(all.len(), 3);
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    let decoded = ids
        .decode(DecodeRequest { id: all[0] })
        .await
        .unwrap()
        .into_inner();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(decoded.unix_ms <= now_ms && now_ms - decoded.unix_ms < 60_000);
    // A value no ID of the layout can have is refused, not decoded.
    let refused = ids
        .decode(DecodeRequest { id: 1 << 63 })
        .await
        .expect_err("2^63 is past the classic layout's 63 bits");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert_eq!(code_of(&refused), "invalid_id");
    // The layout and pool a client making its own snowflake IDs uses.
    let layout = ids
        .layout(workerid_proto::v1::LayoutRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(layout.name, "classic");
    assert_eq!(
        (
            layout.timestamp_bits,
            layout.worker_bits,
            layout.sequence_bits
        ),
        (41, 10, 12)
    );
    assert_eq!(
        (layout.unit_ms, layout.epoch_unix_ms),
        (1, 1_704_067_200_000)
    );
    assert!(!layout.sequence_then_worker);
    assert_eq!(
        (layout.namespace.as_str(), layout.max_worker_id),
        ("workerid-server", 1023)
    );
    let ms = decoded.unix_ms - layout.epoch_unix_ms;
    assert_eq!(all[0] >> 22, ms, "the layout reads the server's own IDs");

    let mut stream = ids
        .stream_ids(StreamIdsRequest {
            tag: "orders".into(),
            count: 10,
            batches: 3,
        })
        .await
        .unwrap()
        .into_inner();
    let mut batches = Vec::new();
    while let Some(batch) = stream.message().await.unwrap() {
        batches.push(batch.ranges);
    }
    assert_eq!(
        batches,
        vec![
            vec![range(5000, 5009)],
            vec![range(5010, 5019)],
            vec![range(5020, 5029)]
        ]
    );
    // Until the client cancels: two batches, then it goes away.
    let mut endless = ids
        .stream_ids(StreamIdsRequest {
            tag: String::new(),
            count: 100,
            batches: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let first = endless.message().await.unwrap().unwrap();
    let second = endless.message().await.unwrap().unwrap();
    assert!(second.ranges[0].first > first.ranges.last().unwrap().last);
    drop(endless);

    let services = [
        "",
        "workerid.v1.Ids",
        "workerid.v1.Leases",
        "workerid.v1.Segments",
    ];
    assert_eq!(
        health(port, &services).await,
        services.map(|service| (service, ServingStatus::Serving))
    );
    let metrics = server.get("/metrics").1;
    assert!(
        metrics.contains(r#"endpoint="/workerid.v1.Ids/NextIds",status="400""#),
        "refused calls are counted:\n{metrics}"
    );
}

/// Each service's health follows what it needs: a server whose snowflake
/// worker finds its pool of one worker ID taken is not ready as a whole
/// nor for `Ids`, while its `Leases` and `Segments` serve.
#[tokio::test(flavor = "multi_thread")]
async fn health_follows_what_each_service_needs() {
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sqlite(first.path());
    let launch = |dir: &std::path::Path, grpc: u16| {
        let top = format!("grpc_listen = \"127.0.0.1:{grpc}\"\n");
        Server::launch(
            dir,
            &store,
            &Launch {
                top: &top,
                tables: "[snowflake]\nmax_worker_id = 0\nttl_secs = 30\n",
                ..Launch::default()
            },
        )
    };
    let holder = launch(first.path(), workerid_testkit::free_port());
    assert_eq!(holder.get("/api/snowflake/get/x").0, 200);
    let port = workerid_testkit::free_port();
    let _left_out = launch(second.path(), port);
    let expected = [
        ("", ServingStatus::NotServing),
        ("workerid.v1.Ids", ServingStatus::NotServing),
        ("workerid.v1.Leases", ServingStatus::Serving),
        ("workerid.v1.Segments", ServingStatus::Serving),
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let answers = health(port, &expected.map(|(service, _)| service)).await;
        if answers == expected {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{answers:?}, not {expected:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn leases_keep_the_librarys_contract() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start(dir.path(), "");
    let mut leases = LeasesClient::new(channel(port).await);
    let acquire = |token: &Token| AcquireRequest {
        namespace: "remote".into(),
        max_worker_id: 1,
        token: token.to_string(),
        ttl_ms: 5_000,
        holder: "grpc-test".into(),
    };
    let (a, b, c) = (Token::generate(), Token::generate(), Token::generate());
    let first = leases.acquire(acquire(&a)).await.unwrap().into_inner();
    let resent = leases.acquire(acquire(&a)).await.unwrap().into_inner();
    assert_eq!(first, resent, "an acquire sent again answers its own grant");
    let second = leases.acquire(acquire(&b)).await.unwrap().into_inner();
    assert_ne!(second.worker_id, first.worker_id);
    refused(
        leases.acquire(acquire(&c)).await,
        Code::ResourceExhausted,
        "no_available_id",
    );
    let renew = |token: &Token, watermark| RenewRequest {
        namespace: "remote".into(),
        worker_id: first.worker_id,
        token: token.to_string(),
        ttl_ms: 5_000,
        watermark,
    };
    leases.renew(renew(&a, 42)).await.unwrap();
    refused(
        leases.renew(renew(&b, 0)).await,
        Code::FailedPrecondition,
        "token_mismatch",
    );
    leases
        .release(ReleaseRequest {
            namespace: "remote".into(),
            worker_id: first.worker_id,
            token: a.to_string(),
            watermark: 0,
        })
        .await
        .unwrap();
    let listing = leases
        .list(ListRequest {
            namespace: "remote".into(),
            ..ListRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((listing.known, listing.max_worker_id), (true, 1));
    let freed = listing
        .leases
        .iter()
        .find(|l| l.worker_id == first.worker_id)
        .unwrap();
    assert_eq!((freed.state.as_str(), freed.watermark), ("free", 42));
    let next = leases.acquire(acquire(&c)).await.unwrap().into_inner();
    assert_eq!(next.worker_id, first.worker_id);
    assert!(next.fence > first.fence, "fences rise with every grant");
    assert_eq!(next.previous_watermark, 42);

    // Bad input: refused before the store, nothing changes.
    let mut bad = acquire(&Token::generate());
    bad.token = "short".into();
    refused(
        leases.acquire(bad).await,
        Code::InvalidArgument,
        "invalid_token",
    );
    let mut bad = acquire(&Token::generate());
    bad.namespace = "no spaces".into();
    refused(
        leases.acquire(bad).await,
        Code::InvalidArgument,
        "invalid_namespace",
    );
    let mut bad = acquire(&Token::generate());
    bad.ttl_ms = 0;
    refused(
        leases.acquire(bad).await,
        Code::InvalidArgument,
        "invalid_ttl",
    );
    let mut bad = acquire(&Token::generate());
    bad.max_worker_id = 7;
    refused(
        leases.acquire(bad).await,
        Code::FailedPrecondition,
        "config_mismatch",
    );
    let listing_after = leases
        .list(ListRequest {
            namespace: "remote".into(),
            ..ListRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listing_after.leases.len(), 2, "{listing_after:?}");
    refused(
        leases
            .force_release(ForceReleaseRequest {
                namespace: "remote".into(),
                worker_id: 5,
            })
            .await,
        Code::InvalidArgument,
        "invalid_worker_id",
    );

    // Any ttl the library allows, whatever the server's own leases use.
    let mut long = acquire(&Token::generate());
    (long.namespace, long.ttl_ms) = ("long".into(), 10 * 60 * 1000);
    leases.acquire(long).await.unwrap();
    let mut too_long = acquire(&Token::generate());
    (too_long.namespace, too_long.ttl_ms) = ("long".into(), 8 * 24 * 60 * 60 * 1000);
    refused(
        leases.acquire(too_long).await,
        Code::InvalidArgument,
        "invalid_ttl",
    );
}

/// A tag made with `Segments.CreateTag` is served by `Ids` at once, not
/// after the server's next read of the tag list.
#[tokio::test(flavor = "multi_thread")]
async fn a_tag_created_over_grpc_is_served_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start(dir.path(), "tags_refresh_ms = 600000");
    let channel = channel(port).await;
    let created = SegmentsClient::new(channel.clone())
        .create_tag(CreateTagRequest {
            tag: "fresh".into(),
            first_id: 1,
            step: 10,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(created.created);
    let ids = IdsClient::new(channel)
        .next_ids(NextIdsRequest {
            tag: "fresh".into(),
            count: 3,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids.ranges, [range(1, 3)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_bearer_token_every_call_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Two tokens, as while one is rotated out: either is taken.
    let (_server, port) = start(dir.path(), "auth_token = [\"s3cret\", \"older\"]\n");
    let mut ids = IdsClient::new(channel(port).await);
    let ask = || NextIdsRequest {
        tag: "test".into(),
        count: 1,
    };
    refused(
        ids.next_ids(ask()).await,
        Code::Unauthenticated,
        "unauthorized",
    );
    let mut wrong = tonic::Request::new(ask());
    wrong
        .metadata_mut()
        .insert("authorization", "Bearer guess".parse().unwrap());
    refused(
        ids.next_ids(wrong).await,
        Code::Unauthenticated,
        "unauthorized",
    );
    let mut right = tonic::Request::new(ask());
    right
        .metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    let batch = ids.next_ids(right).await.unwrap().into_inner();
    assert_eq!(batch.ranges, vec![range(1, 1)], "refused calls took no ID");
    let mut older = tonic::Request::new(ask());
    older
        .metadata_mut()
        .insert("authorization", "Bearer older".parse().unwrap());
    let batch = ids.next_ids(older).await.unwrap().into_inner();
    assert_eq!(batch.ranges, vec![range(2, 2)]);

    // workerid-client: a refusal, which no retry mends, not an outage.
    let url = format!("http://127.0.0.1:{port}");
    for builder in [
        workerid_client::ServerStore::builder(&url),
        workerid_client::ServerStore::builder(&url).bearer_token("guess"),
    ] {
        let refused = builder.connect().await.unwrap_err();
        assert!(
            matches!(refused, workerid_client::ConnectError::Refused { .. }),
            "{refused}"
        );
    }
    workerid_client::ServerStore::builder(&url)
        .bearer_token("s3cret")
        .connect()
        .await
        .unwrap();
}

/// A give-back of a range no store hands out (its last ID at or past
/// 2^63 - 1, whose end would overflow) is refused before the store is
/// called, and the tag goes on where it was.
#[tokio::test(flavor = "multi_thread")]
async fn a_give_back_of_a_range_past_the_last_id_is_refused() {
    use workerid_proto::v1::segments_client::SegmentsClient;
    use workerid_proto::v1::{CreateTagRequest, GiveBackRequest, ReserveRequest, SegmentRange};

    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start(dir.path(), "");
    let mut segments = SegmentsClient::new(channel(port).await);
    let created = segments
        .create_tag(CreateTagRequest {
            tag: "edge".into(),
            first_id: 0,
            step: 10,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(created.created, "a tag at 0, as go-id-alloc's rows start");
    let reserve = || ReserveRequest {
        tag: "edge".into(),
        ..ReserveRequest::default()
    };
    let first = segments.reserve(reserve()).await.unwrap().into_inner();
    assert_eq!((first.first, first.last), (0, 9));
    for last in [workerid::segment::MAX_SEGMENT_ID, u64::MAX] {
        refused(
            segments
                .give_back(GiveBackRequest {
                    tag: "edge".into(),
                    reserved: Some(SegmentRange {
                        first: 0,
                        last,
                        version: first.version,
                        ..SegmentRange::default()
                    }),
                    new_max: 0,
                })
                .await,
            Code::InvalidArgument,
            "invalid_range",
        );
    }
    let next = segments.reserve(reserve()).await.unwrap().into_inner();
    assert_eq!(next.first, 10, "the refused give-backs changed nothing");
}

/// A client that stops reading, without closing its connection (a frozen
/// process, a vanished host), holds no SIGTERM: the server stops within its
/// drain time and releases its worker ID.
#[test]
fn a_client_that_stops_reading_does_not_hold_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = start(dir.path(), "");
    let socket = stream_ids_by_hand(port);
    // The server fills the stream's window, then waits to send.
    std::thread::sleep(Duration::from_secs(1));
    let signalled = Instant::now();
    let status = server.terminate();
    assert!(status.success(), "{status}");
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "{:?}",
        signalled.elapsed()
    );
    drop(socket);
}

/// A connection that answers nothing (its client frozen or gone, a balancer
/// that forgot it) is pinged and closed, stream and all, while one whose
/// client answers the pings stays open however long it is idle.
#[test]
fn a_connection_that_answers_no_ping_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, port) = start(dir.path(), "grpc_keepalive_ms = 500\n");
    let mut answering = stream_ids_by_hand(port);
    let closed = Arc::new(AtomicBool::new(false));
    let answerer = std::thread::spawn({
        let closed = closed.clone();
        move || {
            let mut pings = 0;
            while let Some((kind, flags, payload)) = read_frame(&mut answering) {
                if kind == PING && flags & ACK == 0 {
                    pings += 1;
                    answering.write_all(&frame(PING, ACK, 0, &payload)).unwrap();
                }
            }
            closed.store(true, Ordering::SeqCst);
            pings
        }
    });
    let mut silent = stream_ids_by_hand(port);
    silent
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let started = Instant::now();
    let mut sink = vec![0; 1 << 16];
    loop {
        match silent.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "the silent connection is still open after {:?}: {e}",
                started.elapsed()
            ),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "closed only after {:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !closed.load(Ordering::SeqCst),
        "a connection that answers its pings was closed"
    );
    let status = server.terminate();
    assert!(status.success(), "{status}");
    let pings = answerer.join().unwrap();
    assert!(pings >= 2, "{pings} pings answered");
}
