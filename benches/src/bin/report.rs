//! One command, one table: every store side by side, quickly (a few minutes
//! on 2 cores). Starts its own servers.
//!
//! The client runs on one thread (a current-thread runtime, as the criterion
//! benches do): on a 2-core machine that shares its cores with the servers,
//! a second client thread only adds hand-overs between threads to every
//! round trip, raw or not.
//!
//! `cargo run -p benches --release --bin report`

use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::{acquire_op, release_op, Latency, Raw, Slot};
use redis::aio::ConnectionLike;
use redis::cluster_routing::Slot as ClusterSlot;
use workerid::etcd::EtcdStore;
use workerid::redis::RedisStore;
use workerid::segment::{SegmentStore, Tag};
use workerid::snowflake::{Worker, WorkerOptions};
use workerid::sql::SqlStore;
use workerid::{Allocator, LeaseOptions, LeaseStore};
use workerid_testkit::{RunningStore, Servers, StoreKind};

/// A store that leases worker IDs and keeps segment counters.
trait Store: LeaseStore + SegmentStore {}
impl<T: LeaseStore + SegmentStore> Store for T {}

const ROUNDS: usize = 400;

struct Row {
    name: &'static str,
    lat: Vec<Latency>,
    throughput: [f64; 3],
    full_vs_empty: f64,
    reserve: Duration,
    worker_start: Duration,
}

fn ms(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn options(bits: u8) -> LeaseOptions {
    LeaseOptions::new()
        .worker_bits(bits)
        .max_lease_time(Duration::from_secs(600))
        .ttl(Duration::from_secs(600))
}

/// The pool size of the 99%-full comparison: 2^16, except on etcd, where
/// filling 2^16 takes about 100 s on this VM (one Raft write per grant and
/// one per lease); `cargo bench -p benches --bench etcd` measures 2^16 there.
fn full_pool_bits(name: &str) -> u8 {
    if name.starts_with("etcd") {
        12
    } else {
        16
    }
}

/// The namespace of the empty pool that the 99%-full one (`report.full`) is
/// compared with, named to hash to the same Redis Cluster slot (on other
/// stores the name is just a name). With the two pools on two cluster nodes,
/// the comparison measured the nodes: right after the fill the node that took
/// its writes answered every command, `PING` included, about 45 µs slower
/// for some hundreds of milliseconds (2.8x); after a pause of a second,
/// another node was the slow one (0.48x). On one node: 1.03x.
fn empty_namespace() -> String {
    let full = ClusterSlot::for_key("{report.full}");
    (0u32..)
        .map(|k| format!("report.empty{k}"))
        .find(|ns| ClusterSlot::for_key(format!("{{{ns}}}")) == full)
        .expect("one of 2^32 names shares the slot")
}

/// Client counts of the throughput columns.
const CLIENTS: [usize; 3] = [1, 8, 64];
/// Windows per client count, and their length.
const WINDOWS: u32 = 8;
const WINDOW: Duration = Duration::from_millis(400);

/// `clients` tasks, each holding a lease of its own, renew it as fast as they
/// can for one window, from the moment all of them hold their leases.
/// Returns the renewals that completed within the window.
///
/// Only those count, and the window's own length is the time: a renewal still
/// in flight when the window closes, and the releases afterwards, are left
/// out. (Counting them, and timing until the last task ended, took up to
/// 2 x clients renewals' time of a store that serves one at a time, as SQLite
/// does, into each window: a few per cent against 64 clients.)
async fn renew_window(leases: &Arc<dyn LeaseStore>, clients: usize) -> u64 {
    let ready = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let a = Allocator::from_arc(leases.clone(), &format!("report.tp{clients}"), options(7))
                .expect("allocator");
            let ready = ready.clone();
            tokio::spawn(async move {
                let mut lease = a.acquire().await.expect("acquire");
                ready.wait().await;
                let until = Instant::now() + WINDOW;
                let (mut n, mut failed) = (0u64, 0u64);
                while Instant::now() < until {
                    match a.renew(&mut lease).await {
                        Ok(_) if Instant::now() <= until => n += 1,
                        Ok(_) => {}
                        Err(e) if e.is_retryable() => failed += 1,
                        Err(e) => panic!("renew: {e}"),
                    }
                    // Gives the runtime back: without this, a store that
                    // answers without waiting (memory) would starve the
                    // other clients.
                    tokio::task::yield_now().await;
                }
                let _ = a.release(&lease).await;
                if failed > 0 {
                    eprintln!("{failed} renewals were unavailable");
                }
                n
            })
        })
        .collect();
    ready.wait().await;
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("client");
    }
    total
}

async fn measure(name: &'static str, store: Arc<dyn Store>, raw: Option<Raw>) -> Row {
    let leases: Arc<dyn LeaseStore> = store.clone();
    let allocator = Allocator::from_arc(leases.clone(), "report", options(16)).expect("allocator");
    let held = allocator.acquire().await.expect("acquire");
    let slot = Slot::default();
    let raw = raw.as_deref().map(|raw| ("raw", raw));
    let ops = benches::lease_ops(raw, &allocator, &slot, &held);
    let lat = benches::interleaved(ROUNDS, ops).await;

    // Renews per second with 1, 8 and 64 clients: windows taken in turn
    // (1, 8, 64, 1, 8, 64, ...), so drift in the machine's speed hits each
    // count alike, as `interleaved` does for latencies.
    let mut renewed = [0u64; 3];
    for _ in 0..WINDOWS {
        for (i, clients) in CLIENTS.into_iter().enumerate() {
            renewed[i] += renew_window(&leases, clients).await;
        }
    }
    let spent = (WINDOW * WINDOWS).as_secs_f64();
    let throughput = std::array::from_fn(|i| renewed[i] as f64 / spent);

    let bits = full_pool_bits(name);
    let full = Arc::new(
        Allocator::from_arc(leases.clone(), "report.full", options(bits)).expect("allocator"),
    );
    let empty =
        Allocator::from_arc(leases.clone(), &empty_namespace(), options(bits)).expect("allocator");
    let filling = Instant::now();
    let _held = benches::fill_to_99_percent(&full).await;
    eprintln!(
        "{name}: filled a 2^{} pool in {:.0} s",
        bits,
        filling.elapsed().as_secs_f64()
    );
    let (empty_slot, full_slot) = (Slot::default(), Slot::default());
    let cmp = benches::interleaved(
        ROUNDS / 2,
        vec![
            ("empty", acquire_op(&empty, &empty_slot)),
            ("empty release", release_op(&empty, &empty_slot)),
            ("full", acquire_op(&full, &full_slot)),
            ("full release", release_op(&full, &full_slot)),
        ],
    )
    .await;
    let full_vs_empty = cmp[2].p50.as_secs_f64() / cmp[0].p50.as_secs_f64();

    let tag = Tag::new(format!("report{}", name.len())).expect("tag");
    store.create_tag(&tag, 1, 1000).await.expect("tag");
    let mut reserves = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        store.reserve(&tag, None).await.expect("reserve");
        reserves.push(t.elapsed());
    }
    reserves.sort();

    let mut starts = Vec::new();
    for i in 0..3 {
        let a = Allocator::from_arc(
            leases.clone(),
            &format!("report.worker{i}"),
            options(10).ttl(Duration::from_secs(30)),
        )
        .expect("allocator");
        let t = Instant::now();
        let worker = Worker::join(a, WorkerOptions::new()).await.expect("join");
        worker.next_id().expect("first ID");
        starts.push(t.elapsed());
        worker.stop().await;
    }
    starts.sort();
    Row {
        name,
        lat,
        throughput,
        full_vs_empty,
        reserve: reserves[reserves.len() / 2],
        worker_start: starts[1],
    }
}

async fn sql(name: &'static str, url: &str) -> Row {
    let store = SqlStore::connect(url).await.expect("connect");
    let raw = benches::sql_raw_update(&store).await;
    measure(name, Arc::new(store), Some(raw)).await
}

async fn redis_row(
    name: &'static str,
    store: RedisStore,
    conn: impl ConnectionLike + Clone + 'static,
) -> Row {
    let raw = benches::redis_raw_evalsha(conn).await;
    measure(name, Arc::new(store), Some(raw)).await
}

async fn etcd_row(name: &'static str, endpoints: &[String]) -> Row {
    let store = EtcdStore::connect(endpoints).await.expect("etcd");
    let raw = benches::etcd_raw_txn(&store).await;
    measure(name, Arc::new(store), Some(raw)).await
}

/// The report's two tables, in markdown.
fn render(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "| store | raw round trip p50 | acquire p50 / p99 | renew p50 / p99 | renew raising the watermark p50 / p99 | release p50 / p99 |");
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let raw = r.lat.iter().find(|l| l.name == "raw");
        let cell = |op: &str| {
            let l = r.lat.iter().find(|l| l.name == op).expect("measured");
            let ratio = raw
                .map(|b| format!(" ({:.2}x)", l.p50.as_secs_f64() / b.p50.as_secs_f64()))
                .unwrap_or_default();
            format!("{} / {}{ratio}", ms(l.p50), ms(l.p99))
        };
        let raw = raw.map(|l| ms(l.p50)).unwrap_or_else(|| "n/a".into());
        let _ = writeln!(
            out,
            "| {} | {raw} | {} | {} | {} | {} |",
            r.name,
            cell("acquire"),
            cell("renew"),
            cell(benches::RENEW_RAISING),
            cell("release")
        );
    }
    let _ = writeln!(out, "\n| store | renews/s, 1 client | 8 clients | 64 clients | 99%-full 2^16 (etcd 2^12) acquire vs empty | segment reserve p50 | worker join to first ID |");
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let [a, b, c] = r.throughput;
        let falls = if c < b * 0.95 { " (falls)" } else { "" };
        let _ = writeln!(
            out,
            "| {} | {a:.0} | {b:.0} | {c:.0}{falls} | {:.2}x | {} | {} |",
            r.name,
            r.full_vs_empty,
            ms(r.reserve),
            ms(r.worker_start)
        );
    }
    out
}

/// Whether the row `name` is wanted: every row, or those whose name holds
/// one of the words given on the command line (`-- etcd redis`).
fn wanted(name: &str) -> bool {
    let words: Vec<String> = std::env::args().skip(1).map(|w| w.to_lowercase()).collect();
    words.is_empty() || words.iter().any(|w| name.to_lowercase().contains(w))
}

/// The stores of the report, in its order.
const REPORTED: [StoreKind; 8] = [
    StoreKind::Memory,
    StoreKind::Redis,
    StoreKind::RedisCluster,
    StoreKind::Etcd,
    StoreKind::EtcdCluster,
    StoreKind::Postgres,
    StoreKind::MariaDb,
    StoreKind::Sqlite,
];

/// The row of one store, measured beside its own client's raw round trip.
async fn row(running: &RunningStore) -> Row {
    let name = running.kind().title();
    let url = running.url();
    match running.servers() {
        Servers::None => {
            let store = workerid::open(&url).await.expect("memory");
            measure(name, Arc::new(store), None).await
        }
        Servers::Redis(_) => {
            let store = RedisStore::connect(&url).await.expect("redis");
            let client = redis::Client::open(url).expect("client");
            let conn = redis::aio::ConnectionManager::new(client)
                .await
                .expect("connect");
            redis_row(name, store, conn).await
        }
        Servers::RedisCluster(cluster) => {
            let store = RedisStore::connect_cluster(&cluster.urls())
                .await
                .expect("cluster");
            let client = redis::cluster::ClusterClient::new(cluster.urls()).expect("client");
            let conn = client.get_async_connection().await.expect("connect");
            redis_row(name, store, conn).await
        }
        Servers::Etcd(node) => etcd_row(name, &[node.endpoint()]).await,
        Servers::EtcdCluster(cluster) => etcd_row(name, &cluster.endpoints()).await,
        Servers::Postgres(_) | Servers::MariaDb(_) | Servers::SqliteFile(_) => {
            sql(name, &url).await
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let rows = rt.block_on(async {
        let mut rows = Vec::new();
        let kinds: Vec<_> = REPORTED.iter().filter(|k| wanted(k.title())).collect();
        let progress = workerid_testkit::progress::Progress::steps(kinds.len() as u64, "report");
        for kind in kinds {
            progress.message(kind.title());
            let running = kind.start();
            rows.push(row(&running).await);
            progress.step();
        }
        rows
    });
    let mut tables = render(&rows);
    tables.push_str(&format!(
        "\n(ran in {:.0} s)\n",
        started.elapsed().as_secs_f64()
    ));
    println!("\n{tables}");
    let words: Vec<String> = std::env::args().skip(1).collect();
    let command = ["cargo run -p benches --release --bin report --"]
        .into_iter()
        .chain(words.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    // A partial run (only some rows) is not the report of record.
    let name = if words.is_empty() {
        "report"
    } else {
        "report-partial"
    };
    benches::record::record(name, command.trim_end_matches(" --"), &tables);
}
