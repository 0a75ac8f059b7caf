//! Redis: acquire, renew and release through the Allocator, beside a raw
//! EVALSHA of a trivial script on the same kind of connection (the physical
//! limit: one round trip); and acquire in an empty pool vs a 99%-full 2^16 pool.
//!
//! `cargo bench -p benches --bench redis` (starts its own redis-server).

use std::time::{Duration, Instant};

use benches::{acquire_op, release_op, Op, Slot};

use criterion::{criterion_group, Criterion};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::runtime::Runtime;
use workerid::redis::RedisStore;
use workerid::Allocator;
use workerid_testkit::redis::{RedisConfig, RedisServer};

const GROUP: &str = "redis";

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn allocator(rt: &Runtime, url: &str, namespace: &str, bits: u8) -> Allocator {
    let store = rt.block_on(RedisStore::connect(url)).expect("connect");
    benches::allocator(store, namespace, bits)
}

/// Fills a 2^16 pool, then frees 1% of it: acquire must find one of 656 free
/// IDs among 65 536.
fn ninety_nine_percent_full(rt: &Runtime, url: &str) -> Allocator {
    let full = allocator(rt, url, "bench-full", 16);
    rt.block_on(async {
        let mut leases = Vec::with_capacity(1 << 16);
        for _ in 0..(1 << 16) {
            leases.push(full.acquire().await.expect("fill the pool"));
        }
        for lease in leases.iter().step_by(100) {
            full.release(lease).await.expect("free 1%");
        }
    });
    full
}

/// `iters` acquire + release cycles (the pool never changes), timing only
/// the acquires or only the releases.
async fn cycles(a: &Allocator, iters: u64, time_acquire: bool) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let started = Instant::now();
        let lease = a.acquire().await.expect("acquire");
        let acquired = started.elapsed();
        let started = Instant::now();
        a.release(&lease).await.expect("release");
        total += if time_acquire {
            acquired
        } else {
            started.elapsed()
        };
    }
    total
}

fn lease_ops(c: &mut Criterion) {
    let server = RedisServer::start(RedisConfig::default());
    let url = server.url();
    let rt = runtime();
    let mut group = c.benchmark_group(GROUP);
    group
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));

    let config = ConnectionManagerConfig::new();
    let client = redis::Client::open(url.as_str()).expect("client");
    let raw = rt
        .block_on(ConnectionManager::new_with_config(client, config))
        .expect("connect");
    let raw = rt.block_on(benches::redis_raw_evalsha(raw));
    group.bench_function("raw_evalsha", |b| b.to_async(&rt).iter(&raw));

    let empty = allocator(&rt, &url, "bench-empty", 16);
    group.bench_function("acquire", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let a = empty.clone();
            async move { cycles(&a, iters, true).await }
        })
    });
    let mut held = rt.block_on(empty.acquire()).expect("acquire");
    group.bench_function("renew", |b| {
        b.to_async(&rt).iter(|| {
            let (a, mut lease) = (empty.clone(), held.clone());
            async move { a.renew(&mut lease).await.expect("renew") }
        })
    });
    rt.block_on(empty.renew(&mut held)).expect("renew");
    group.bench_function("release", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let a = empty.clone();
            async move { cycles(&a, iters, false).await }
        })
    });

    let full = ninety_nine_percent_full(&rt, &url);
    group.bench_function("acquire_99pct_full_2pow16", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let a = full.clone();
            async move { cycles(&a, iters, true).await }
        })
    });
    group.finish();
}

criterion_group!(benches, lease_ops);

/// The ratio table: lease ops and the raw round trip, interleaved in one loop.
fn ratios() {
    let server = RedisServer::start(RedisConfig::default());
    let url = server.url();
    let rt = runtime();
    let client = redis::Client::open(url.as_str()).expect("client");
    let raw = rt
        .block_on(ConnectionManager::new_with_config(
            client,
            ConnectionManagerConfig::new(),
        ))
        .expect("connect");
    let raw = rt.block_on(benches::redis_raw_evalsha(raw));
    let empty = allocator(&rt, &url, "ratio-empty", 16);
    let full = ninety_nine_percent_full(&rt, &url);
    let held = rt.block_on(empty.acquire()).expect("acquire");
    let store = empty.store().clone();
    let (slot, full_slot) = (Slot::default(), Slot::default());
    const RAW: &str = "raw EVALSHA (one round trip)";
    const FULL: &str = "acquire, 99% full 2^16 pool";
    let mut goals = benches::lease_goals(RAW).to_vec();
    goals.push((FULL, "acquire", 1.5));
    let table = |placement: &str| {
        let store_renew_op: Op = Box::new(|| {
            let (store, lease, ttl) = (&store, &held, empty.options().default_ttl());
            Box::pin(async move {
                store
                    .renew(lease.namespace(), lease.id(), lease.token(), ttl, 0)
                    .await
                    .expect("renew");
            })
        });
        let mut ops = benches::lease_ops(Some((RAW, &raw)), &empty, &slot, &held);
        ops.extend([
            ("renew, store alone (no Allocator)", store_renew_op),
            (FULL, acquire_op(&full, &full_slot)),
            ("release, 99% full 2^16 pool", release_op(&full, &full_slot)),
        ]);
        let results = rt.block_on(benches::interleaved(3000, ops));
        let title = format!("redis, interleaved (3000 rounds), {placement}");
        benches::print_table(&title, &results, &goals);
    };
    table("as the scheduler places client and server");

    // The same on one CPU: the round trip is then two context switches on
    // that CPU, never the wake-up of another, idle one (see `pin`).
    let pids = [
        server.process().pid().expect("the server runs"),
        std::process::id(),
    ];
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    pin(&pids, "0");
    table("client and server on one CPU");
    pin(&pids, &format!("0-{}", cpus - 1));
    server_side(&rt, &url);
}

/// The server's own time per operation, from its slow log with every
/// command logged (`slowlog-log-slower-than 0`): the Lua work a round trip
/// carries, apart from the network and the client. Each operation runs
/// alone, 1000 times.
fn server_side(rt: &Runtime, url: &str) {
    const N: usize = 1000;
    let client = redis::Client::open(url).expect("client");
    let mut conn = rt
        .block_on(client.get_multiplexed_async_connection())
        .expect("connect");
    rt.block_on(async {
        for (name, value) in [
            ("slowlog-log-slower-than", "0"),
            ("slowlog-max-len", "4096"),
        ] {
            redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(value)
                .query_async::<()>(&mut conn)
                .await
                .expect("config set");
        }
    });
    // The server's slow log and its EVALSHA usec_per_call (INFO
    // commandstats) since the last call, both started afresh.
    let mut run = || -> (Vec<u64>, Option<f64>) {
        rt.block_on(async {
            let stats: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut conn)
                .await
                .expect("info commandstats");
            redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query_async::<()>(&mut conn)
                .await
                .expect("config resetstat");
            let per_call = stats
                .lines()
                .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
                .and_then(|fields| {
                    fields
                        .split(',')
                        .find_map(|f| f.strip_prefix("usec_per_call="))
                })
                .and_then(|v| v.trim().parse::<f64>().ok());
            let mut log: Vec<redis::Value> = redis::cmd("SLOWLOG")
                .arg("GET")
                .arg(N * 2)
                .query_async(&mut conn)
                .await
                .expect("slowlog get");
            redis::cmd("SLOWLOG")
                .arg("RESET")
                .query_async::<()>(&mut conn)
                .await
                .expect("slowlog reset");
            // Entries: [id, time, duration in µs, [command, args...], ...].
            log.retain(|entry| matches!(entry, redis::Value::Array(parts)
                if matches!(parts.get(3), Some(redis::Value::Array(args))
                    if matches!(args.first(), Some(redis::Value::BulkString(c)) if c.eq_ignore_ascii_case(b"evalsha")))));
            let mut micros: Vec<u64> = log
                .iter()
                .filter_map(|entry| match entry {
                    redis::Value::Array(parts) => match parts.get(2) {
                        Some(redis::Value::Int(us)) => u64::try_from(*us).ok(),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            micros.sort_unstable();
            (micros, per_call)
        })
    };
    let a = allocator(rt, url, "server-side", 16);
    let _ = run();
    let mut leases = rt.block_on(async {
        let mut leases = Vec::with_capacity(N);
        for _ in 0..N {
            leases.push(a.acquire().await.expect("acquire"));
        }
        leases
    });
    let acquire = run();
    rt.block_on(async {
        for lease in &mut leases[..1] {
            for _ in 0..N {
                a.renew(lease).await.expect("renew");
            }
        }
    });
    let renew = run();
    rt.block_on(async {
        for lease in &leases {
            a.release(lease).await.expect("release");
        }
    });
    let release = run();
    benches::record::say(format!("\n| redis, the server's own time per call ({N} calls each) | usec_per_call (INFO commandstats) | slow log mean | median | p99 |"));
    benches::record::say("| --- | --- | --- | --- | --- |");
    for (op, (micros, per_call)) in [("acquire", acquire), ("renew", renew), ("release", release)] {
        assert!(!micros.is_empty(), "{op}: no EVALSHA in the slow log");
        let per_call = per_call.map_or("n/a".to_string(), |us| format!("{us:.2} µs"));
        let mean = micros.iter().sum::<u64>() as f64 / micros.len() as f64;
        let p99 = micros[(micros.len() * 99 / 100).min(micros.len() - 1)];
        benches::record::say(format!(
            "| {op} | {per_call} | {mean:.1} µs | {} µs | {p99} µs |",
            micros[micros.len() / 2]
        ));
    }
    rt.block_on(async {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("slowlog-log-slower-than")
            .arg("10000")
            .query_async::<()>(&mut conn)
            .await
            .expect("config set");
    });
}

/// Pins every thread of the processes `pids` to `cpus` (a `taskset` list).
///
/// On this 2-vCPU KVM machine a loopback round trip between two processes on
/// different CPUs takes one of two times, and keeps to one for seconds: about
/// 10 µs while the server's CPU is awake, about 75 µs when it has gone idle
/// and the host must wake it first (a raw `EVALSHA` measured 9 to 11 µs in
/// some runs, 73 to 78 µs in others, with no change in between). The store's
/// own work is the same few µs either way, so its ratio to the raw round
/// trip swings with the regime. On one CPU there is no other CPU to wake.
fn pin(pids: &[u32], cpus: &str) {
    for pid in pids {
        let status = std::process::Command::new("taskset")
            .args(["--all-tasks", "--cpu-list", "--pid", cpus, &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("taskset (util-linux)");
        assert!(status.success(), "taskset {cpus} {pid}");
    }
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    ratios();
    benches::record::record_transcript("redis", "cargo bench -p benches --bench redis");
}
