//! Helpers shared by the benchmarks.
//!
//! Criterion measures each operation on its own, one after the other; on a
//! small shared machine the load drifts between those runs, so ratios between
//! them are noisy. [`interleaved`] measures several operations round-robin in
//! one loop, so drift hits all of them alike: the ratio tables use it.
#![deny(missing_docs)]

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use workerid::{Allocator, Lease, LeaseOptions, LeaseStore};

pub mod record;
pub mod rounds;

/// One operation to time: an async closure called once per round.
pub type Op<'a> = Box<dyn FnMut() -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a>;

/// Latencies of one operation.
#[derive(Debug, Clone)]
pub struct Latency {
    /// Its name.
    pub name: String,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
}

/// Runs every op once per round, round-robin, for `rounds` rounds (after
/// `rounds / 10` unmeasured warm-up rounds), and returns each op's latencies.
pub async fn interleaved(rounds: usize, mut ops: Vec<(&str, Op<'_>)>) -> Vec<Latency> {
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); ops.len()];
    for round in 0..rounds + rounds / 10 {
        for (i, (_, op)) in ops.iter_mut().enumerate() {
            let started = Instant::now();
            op().await;
            if round >= rounds / 10 {
                samples[i].push(started.elapsed());
            }
        }
    }
    ops.iter()
        .zip(samples)
        .map(|((name, _), mut s)| {
            s.sort();
            Latency {
                name: name.to_string(),
                p50: s[s.len() / 2],
                p99: s[(s.len() * 99 / 100).min(s.len() - 1)],
            }
        })
        .collect()
}

/// Prints a markdown table: each op's p50 and p99, and its p50 ratio to the
/// op named in `against` with the goal it must meet.
pub fn print_table(title: &str, results: &[Latency], against: &[(&str, &str, f64)]) {
    let find = |name: &str| results.iter().find(|l| l.name == name);
    record::say(format!("\n| {title} | p50 | p99 | ratio of p50 | goal |"));
    record::say("| --- | --- | --- | --- | --- |");
    for latency in results {
        let ratio = against
            .iter()
            .find(|(op, _, _)| *op == latency.name)
            .and_then(|(_, base, goal)| find(base).map(|b| (b, goal)));
        let (ratio, goal) = match ratio {
            Some((base, goal)) => {
                let r = latency.p50.as_secs_f64() / base.p50.as_secs_f64();
                let verdict = if r <= *goal { "met" } else { "MISSED" };
                (
                    format!("{r:.2}x {}", base.name),
                    format!("≤ {goal}x {verdict}"),
                )
            }
            None => (String::new(), String::new()),
        };
        record::say(format!(
            "| {} | {:.1} µs | {:.1} µs | {ratio} | {goal} |",
            latency.name,
            latency.p50.as_secs_f64() * 1e6,
            latency.p99.as_secs_f64() * 1e6,
        ));
    }
}

/// Hands a lease from the op that acquires it to the op that releases it.
pub type Slot = Rc<RefCell<Option<Lease>>>;

/// An op that acquires with `allocator` and leaves the lease in `slot`.
pub fn acquire_op<'a>(allocator: &'a Allocator, slot: &Slot) -> Op<'a> {
    let slot = slot.clone();
    Box::new(move || {
        let slot = slot.clone();
        Box::pin(async move {
            let lease = allocator.acquire().await.expect("acquire");
            *slot.borrow_mut() = Some(lease);
        })
    })
}

/// An op that releases the lease `acquire_op` left in `slot`.
pub fn release_op<'a>(allocator: &'a Allocator, slot: &Slot) -> Op<'a> {
    let slot = slot.clone();
    Box::new(move || {
        let lease = slot.borrow_mut().take().expect("acquired in this round");
        Box::pin(async move { allocator.release(&lease).await.expect("release") })
    })
}

/// An op that renews `lease` with `allocator`.
pub fn renew_op<'a>(allocator: &'a Allocator, lease: &'a Lease) -> Op<'a> {
    Box::new(move || {
        let mut lease = lease.clone();
        Box::pin(async move {
            allocator.renew(&mut lease).await.expect("renew");
        })
    })
}

/// An op that renews `lease` with `allocator`, raising the stored watermark
/// each time (to a number that rises from the current time in milliseconds),
/// as the snowflake keeper's renewals do.
pub fn renew_raising_op<'a>(allocator: &'a Allocator, lease: &'a Lease) -> Op<'a> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut watermark = u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX / 2);
    Box::new(move || {
        watermark += 1;
        let mut lease = lease.clone();
        Box::pin(async move {
            allocator
                .renew_with_watermark(&mut lease, watermark)
                .await
                .expect("renew raising the watermark");
        })
    })
}

/// Name of the renewal that raises the watermark in [`lease_ops`].
pub const RENEW_RAISING: &str = "renew, raising the watermark";

/// Name of the raw round trip in [`lease_ops`] that follows a plain renew
/// (shown, but no ratio is taken against it).
pub const RAW_AFTER_RENEW: &str = "raw, right after a renew";

/// The operations every lease ratio table times, in the order each round
/// runs them: the store's raw round trip `raw` (when it has one) under its
/// name, acquire and release (the lease `slot` carries), renew of `held`,
/// and renew of `held` raising the watermark.
///
/// A plain renew may not write at all (etcd's is a keep-alive and a
/// read-only guarded transaction), and on etcd a write right after a read
/// costs about a tenth more than one after a write. So when there is a raw
/// op, another one follows the plain renew, shown on its own row: every
/// other op, the raw one included, follows a write, as in a loop of raw
/// writes.
pub fn lease_ops<'a, R, F>(
    raw: Option<(&'static str, &'a R)>,
    allocator: &'a Allocator,
    slot: &Slot,
    held: &'a Lease,
) -> Vec<(&'static str, Op<'a>)>
where
    R: Fn() -> F + ?Sized,
    F: Future<Output = ()> + 'a,
{
    let raw_op = |raw: &'a R| -> Op<'a> { Box::new(move || Box::pin(raw())) };
    let mut ops: Vec<(&'static str, Op<'a>)> = Vec::new();
    if let Some((name, raw)) = raw {
        ops.push((name, raw_op(raw)));
    }
    ops.push(("acquire", acquire_op(allocator, slot)));
    ops.push(("release", release_op(allocator, slot)));
    ops.push(("renew", renew_op(allocator, held)));
    if let Some((_, raw)) = raw {
        ops.push((RAW_AFTER_RENEW, raw_op(raw)));
    }
    ops.push((RENEW_RAISING, renew_raising_op(allocator, held)));
    ops
}

/// An allocator for a 2^`bits` pool on `store`, leasing for up to an hour.
pub fn allocator(store: impl LeaseStore, namespace: &str, bits: u8) -> Allocator {
    let options = LeaseOptions::new()
        .worker_bits(bits)
        .max_lease_time(Duration::from_secs(3600));
    Allocator::new(store, namespace, options).expect("allocator")
}

/// One raw round trip of a store's own client, called once per round.
pub type Raw = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()>>>>;

/// etcd's physical limit for a lease operation: one guarded transaction
/// (compare a key's value, then put it) on the client the store uses.
pub async fn etcd_raw_txn(store: &workerid::etcd::EtcdStore) -> Raw {
    use etcd_client::{Compare, CompareOp, Txn, TxnOp};
    let client = store.client().await.expect("the store's etcd client");
    let key = "bench/raw";
    client
        .kv_client()
        .put(key, "v", None)
        .await
        .expect("raw key");
    Box::new(move || {
        let mut kv = client.kv_client();
        Box::pin(async move {
            let txn = Txn::new()
                .when([Compare::value(key, CompareOp::Equal, "v")])
                .and_then([TxnOp::put(key, "v", None)]);
            let answer = kv.txn(txn).await.expect("raw txn");
            assert!(answer.succeeded(), "the raw guard holds");
        })
    })
}

/// SQL's physical limit for a lease operation: one guarded `UPDATE` of a
/// row (with `RETURNING` where the database has it; MariaDB has not) on the
/// store's own pool.
pub async fn sql_raw_update(store: &workerid::sql::SqlStore) -> Raw {
    fn q(sql: &'static str) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
        sqlx::query(sqlx::AssertSqlSafe(sql))
    }
    let pool = store.pool().clone();
    for setup in [
        "CREATE TABLE IF NOT EXISTS bench_raw (k BIGINT PRIMARY KEY, v BIGINT NOT NULL)",
        "DELETE FROM bench_raw",
        "INSERT INTO bench_raw (k, v) VALUES (1, 0)",
    ] {
        q(setup).execute(&pool).await.expect("raw table");
    }
    let update = match store.dialect() {
        workerid::sql::Dialect::MySql => "UPDATE bench_raw SET v = v + 1 WHERE k = 1 AND v >= 0",
        _ => "UPDATE bench_raw SET v = v + 1 WHERE k = 1 AND v >= 0 RETURNING v",
    };
    Box::new(move || {
        let pool = pool.clone();
        Box::pin(async move {
            q(update).execute(&pool).await.expect("raw update");
        })
    })
}

/// Redis's physical limit for a lease operation: an `EVALSHA` of a trivial
/// script (`return 1`) on `conn`, with one key (hash-tagged, so it routes on
/// a Redis Cluster too).
pub async fn redis_raw_evalsha(mut conn: impl redis::aio::ConnectionLike + Clone + 'static) -> Raw {
    const KEY: &str = "bench{raw}";
    let script = redis::Script::new("return 1");
    let _: i64 = script
        .key(KEY)
        .invoke_async(&mut conn)
        .await
        .expect("load the trivial script");
    let sha = script.get_hash().to_string();
    Box::new(move || {
        let (mut conn, sha) = (conn.clone(), sha.clone());
        Box::pin(async move {
            let _: i64 = redis::cmd("EVALSHA")
                .arg(sha)
                .arg(1)
                .arg(KEY)
                .query_async(&mut conn)
                .await
                .expect("evalsha");
        })
    })
}

/// The goals of a lease ratio table: every lease op of [`lease_ops`] at
/// most 1.2x the raw round trip named `raw_name`.
pub fn lease_goals(raw_name: &str) -> [(&str, &str, f64); 4] {
    ["acquire", "release", "renew", RENEW_RAISING].map(|op| (op, raw_name, 1.2))
}

/// Measures acquire, release and renew with `allocator` interleaved with
/// `raw` (the store's one round trip, named `raw_name`) for `rounds` rounds,
/// and prints the table against the 1.2x goal.
pub async fn lease_ops_table<R, F>(
    title: &str,
    raw_name: &'static str,
    raw: &R,
    allocator: &Allocator,
    rounds: usize,
) where
    R: Fn() -> F + ?Sized,
    F: Future<Output = ()>,
{
    let held = allocator.acquire().await.expect("acquire");
    let slot = Slot::default();
    let ops = lease_ops(Some((raw_name, raw)), allocator, &slot, &held);
    let results = interleaved(rounds, ops).await;
    print_table(
        &format!("{title}, interleaved ({rounds} rounds)"),
        &results,
        &lease_goals(raw_name),
    );
}

/// Fills `allocator`'s pool with 64 tasks at once until it is full, then
/// releases every hundredth lease: the pool is 99 % held. Returns the leases
/// still held (keep them: they are what makes the pool full).
pub async fn fill_to_99_percent(allocator: &std::sync::Arc<Allocator>) -> Vec<Lease> {
    let fillers: Vec<_> = (0..64)
        .map(|_| {
            let full = allocator.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                while let Ok(lease) = full.acquire().await {
                    got.push(lease);
                }
                got
            })
        })
        .collect();
    let mut held = Vec::new();
    for filler in fillers {
        held.extend(filler.await.expect("filler"));
    }
    let mut kept = Vec::with_capacity(held.len());
    for (i, lease) in held.into_iter().enumerate() {
        if i % 100 == 0 {
            allocator.release(&lease).await.expect("release");
        } else {
            kept.push(lease);
        }
    }
    kept
}
