//! IDs per second through the gRPC API and the client crate, on the release
//! build of `workerid-server` over a SQLite file (one worker thread, as the
//! HTTP bench runs it):
//!
//! - `StreamIds` of a segment tag and of snowflake IDs, batches of 10 000
//!   as ranges (goal for segments: at least 50 000 000 IDs/s), beside the
//!   unary `NextIds` of 10 000 and of one;
//! - workerid-client's `ServerStore` under a `SegmentAllocator` on one
//!   thread, beside the same allocator on the SQLite store in this process
//!   (goal: within 10 %).
//!
//! `cargo run -p benches --release --bin grpc` (the server program:
//! `WORKERID_SERVER_BIN`, else built in this profile).

use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::record::{record_transcript, say};
use benches::rounds::median;
use workerid::segment::{SegmentAllocator, SegmentOptions};
use workerid_client::ServerStore;
use workerid_faults::service::server_binary;
use workerid_proto::v1::ids_client::IdsClient;
use workerid_proto::v1::{IdBatch, NextIdsRequest, StreamIdsRequest};
use workerid_testkit::{free_port, ServerProcess, ServerSpec};

/// Rounds per contender, and how long each lasts.
const ROUNDS: usize = 5;
const ROUND: Duration = Duration::from_secs(2);

fn ids(batch: &IdBatch) -> u64 {
    batch.ranges.iter().map(|r| r.last - r.first + 1).sum()
}

/// IDs per second of `round` run for [`ROUND`], its median over [`ROUNDS`].
async fn rate<F, Fut>(mut round: F) -> (f64, f64, f64)
where
    F: FnMut(Instant) -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let mut rates = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let n = round(started + ROUND).await;
        rates.push(n as f64 / started.elapsed().as_secs_f64());
    }
    let low = rates.iter().copied().fold(f64::MAX, f64::min);
    let high = rates.iter().copied().fold(0.0, f64::max);
    (median(&rates), low, high)
}

/// A rate with a unit that keeps three significant figures or so.
fn per_second(rate: f64) -> String {
    match rate {
        r if r >= 1e9 => format!("{:.2}G", r / 1e9),
        r if r >= 1e6 => format!("{:.1}M", r / 1e6),
        r => format!("{:.1}k", r / 1e3),
    }
}

fn row(what: &str, (m, low, high): (f64, f64, f64), goal: &str) {
    say(format!(
        "| {what} | {} | {} to {} | {goal} |",
        per_second(m),
        per_second(low),
        per_second(high)
    ));
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let bin = server_binary().expect("the workerid-server program");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = workerid_testkit::sqlite_url(&dir.path().join("ids.db"));
    let (http, grpc) = (free_port(), free_port());
    let config = dir.path().join("server.toml");
    std::fs::write(
        &config,
        "[[tags]]\nname = \"stream\"\nfirst_id = 1\nstep = 1000\n\
         [[tags]]\nname = \"unary\"\nfirst_id = 1\nstep = 1000\n",
    )
    .expect("the config file");
    let pairs = [
        ("--config", config.display().to_string()),
        ("--store", store.clone()),
        ("--listen", format!("127.0.0.1:{http}")),
        ("--grpc-listen", format!("127.0.0.1:{grpc}")),
        ("--workers", "1".to_string()),
        ("--max-batch", "10000".to_string()),
    ];
    let _server = ServerProcess::launch("workerid-server", move |_| {
        ServerSpec::new(bin)
            .arg_pairs(&pairs)
            .ready(move || std::net::TcpStream::connect(("127.0.0.1", grpc)).is_ok())
    });
    let url = format!("http://127.0.0.1:{grpc}");
    let channel = tonic::transport::Endpoint::from_shared(url.clone())
        .expect("the URL")
        .connect()
        .await
        .expect("connect");
    let client = IdsClient::new(channel);

    say("workerid-server (release, `--workers 1`) on a SQLite file, this process as the client");
    say("");
    say("| path | IDs/s, median | range | goal |");
    say("| --- | --- | --- | --- |");
    let stream = |tag: &'static str| {
        let client = client.clone();
        move |until: Instant| {
            let mut client = client.clone();
            async move {
                let request = StreamIdsRequest {
                    tag: tag.into(),
                    count: 10_000,
                    batches: 0,
                };
                let mut stream = client
                    .stream_ids(request)
                    .await
                    .expect("a stream")
                    .into_inner();
                let mut n = 0;
                while Instant::now() < until {
                    let batch = stream.message().await.expect("a batch").expect("more");
                    n += ids(&batch);
                }
                n
            }
        }
    };
    let segments = rate(stream("stream")).await;
    row(
        "gRPC `StreamIds`, segment tag, batches of 10 000",
        segments,
        if segments.0 >= 50e6 {
            "≥ 50M: met"
        } else {
            "≥ 50M: MISSED"
        },
    );
    row(
        "gRPC `StreamIds`, snowflake, batches of 10 000",
        rate(stream("")).await,
        "(the classic layout caps at 4.096M/s)",
    );
    for count in [10_000, 1] {
        let unary = rate(|until| {
            let mut client = client.clone();
            async move {
                let mut n = 0;
                while Instant::now() < until {
                    let request = NextIdsRequest {
                        tag: "unary".into(),
                        count,
                    };
                    n += ids(&client.next_ids(request).await.expect("IDs").into_inner());
                }
                n
            }
        })
        .await;
        row(
            &format!("gRPC `NextIds`, count={count}, one call at a time"),
            unary,
            "",
        );
    }

    let remote = ServerStore::connect(url)
        .await
        .expect("connect the client crate");
    let local = workerid::open(&store).await.expect("open the SQLite file");
    let through_server = Arc::new(SegmentAllocator::new(remote, SegmentOptions::default()));
    let in_process = Arc::new(SegmentAllocator::new(
        local.segment_store(),
        SegmentOptions::default(),
    ));
    through_server
        .create_tag("client", 1, 1000)
        .await
        .expect("a tag");
    in_process
        .create_tag("local", 1, 1000)
        .await
        .expect("a tag");
    let per_thread = |allocator: Arc<SegmentAllocator>, tag: &'static str| {
        move |until: Instant| {
            let allocator = allocator.clone();
            async move {
                let mut n = 0;
                while Instant::now() < until {
                    for _ in 0..1_000 {
                        std::hint::black_box(allocator.next_id(tag).await.expect("an ID"));
                    }
                    n += 1_000;
                }
                n
            }
        }
    };
    let a = rate(per_thread(through_server, "client")).await;
    let b = rate(per_thread(in_process, "local")).await;
    let ratio = b.0 / a.0;
    row(
        "workerid-client: `SegmentAllocator` over `ServerStore`, one thread",
        a,
        &format!(
            "{ratio:.3}x the in-process time per ID (≤ 1.10x: {})",
            if ratio <= 1.10 { "met" } else { "MISSED" }
        ),
    );
    row(
        "`SegmentAllocator` on the SQLite store in this process, one thread",
        b,
        "",
    );
    say("");
    say("The HTTP figures (count=1, 100, 10 000 over /alloc): `bash benches/http/run.sh`.");
    record_transcript("grpc", "cargo run -p benches --release --bin grpc");
}
