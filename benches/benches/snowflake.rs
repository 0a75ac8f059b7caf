//! Snowflake generators: throughput against the layout's cap (41/10/12: 4096
//! IDs per millisecond) on 1 and 2 threads, and the cost of one ID with a
//! layout that does not cap, beside `ferroid`'s atomic generator and
//! `rs-snowflake` in the same run.
//!
//! `cargo bench -p benches --bench snowflake`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use ferroid::generator::AtomicSnowflakeGenerator;
use ferroid::time::MonotonicClock;
use workerid_core::snowflake::{Generator, Layout, CLASSIC_EPOCH};

ferroid::define_snowflake_id!(
    /// 41 bits of ms, 2 machine bits, 20 sequence bits: never caps here.
    WideId, u64,
    reserved: 1,
    timestamp: 41,
    machine_id: 2,
    sequence: 20
);

fn wide_layout() -> Layout {
    Layout::new(41, 2, 20, Duration::from_millis(1), CLASSIC_EPOCH).expect("layout")
}

fn per_id(c: &mut Criterion) {
    let mut group = c.benchmark_group("snowflake_per_id");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    let ours = Generator::with_system_clock(wide_layout(), 1).expect("generator");
    group.bench_function("workerid", |b| {
        b.iter(|| black_box(ours.next_id().expect("id")))
    });
    let ferroid = AtomicSnowflakeGenerator::<WideId, _>::new(1, MonotonicClock::default());
    group.bench_function("ferroid_atomic", |b| {
        b.iter(|| black_box(ferroid.next_id(|_| std::hint::spin_loop())))
    });
    let mut rs = snowflake::SnowflakeIdGenerator::new(1, 1);
    group.bench_function("rs_snowflake_capped_41_10_12", |b| {
        b.iter(|| black_box(rs.generate()))
    });
    group.finish();
}

criterion_group!(benches, per_id);

/// IDs per second of the classic layout on `threads` threads sharing one generator.
fn throughput(threads: usize, per_thread: usize) -> f64 {
    let generator =
        Arc::new(Generator::with_system_clock(Layout::classic(), 1).expect("generator"));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let g = generator.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    black_box(g.next_id().expect("id"));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    (threads * per_thread) as f64 / started.elapsed().as_secs_f64()
}

/// ns per ID over `n` calls of `f`, best of three.
fn ns_per_id(n: u32, mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..n {
                f();
            }
            started.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();

    let cap = Layout::classic().ids_per_second();
    println!(
        "\n| classic 41/10/12, one generator | IDs per second | of the cap ({:.3}M/s) | goal |",
        cap / 1e6
    );
    println!("| --- | --- | --- | --- |");
    for threads in [1, 2] {
        let rate = throughput(threads, 8_192_000 / threads);
        let share = rate / cap * 100.0;
        let verdict = if share >= 99.0 { "met" } else { "MISSED" };
        println!(
            "| {threads} thread(s) | {:.3}M | {share:.1} % | ≥ 99 % {verdict} |",
            rate / 1e6
        );
    }

    let ours = Generator::with_system_clock(wide_layout(), 1).expect("generator");
    let ferroid = AtomicSnowflakeGenerator::<WideId, _>::new(1, MonotonicClock::default());
    let mut rs = snowflake::SnowflakeIdGenerator::new(1, 1);
    let n = 2_000_000;
    let rows = [
        (
            "workerid Generator (41/2/20)",
            ns_per_id(n, || {
                black_box(ours.next_id().expect("id"));
            }),
        ),
        (
            "ferroid AtomicSnowflakeGenerator (41/2/20)",
            ns_per_id(n, || {
                black_box(ferroid.next_id(|_| std::hint::spin_loop()));
            }),
        ),
        (
            "rs-snowflake generate (41/5/5/12, caps at 4096/ms)",
            ns_per_id(n, || {
                black_box(rs.generate());
            }),
        ),
    ];
    println!("\n| one ID, a layout that does not cap | ns per ID |");
    println!("| --- | --- |");
    for (name, ns) in rows {
        println!("| {name} | {ns:.1} |");
    }
}
