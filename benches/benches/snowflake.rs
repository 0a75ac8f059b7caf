//! Snowflake generators: throughput against the layout's cap (41/10/12: 4096
//! IDs per millisecond) on 1 and 2 threads, and the cost of one ID with a
//! layout that does not cap, beside `ferroid`'s atomic generator and
//! `rs-snowflake` in the same run.
//!
//! `cargo bench -p benches --bench snowflake`
//!
//! The final table is the one to read: many short rounds that take turns,
//! on one pinned CPU after a warm-up, each contender's median and best
//! round, and its ratio to ferroid as the median of the rounds' ratios.
//! Its last rows time what any generator that reads the kernel's clock on
//! every ID is made of (a coarse clock read, an atomic fetch-and-add, both
//! together): ferroid reads a clock its own thread keeps instead, so how
//! these cost against its whole ID (mostly its compare-and-swap) differs
//! from host to host, and so does every ratio. The same generator on a
//! [`TickingClock`] (a thread of ours keeps the time, as ferroid's does) is
//! timed beside them, with the ticker's own cost: its wake-ups per second
//! and its share of a CPU, and that share with 1, 100 and 1000 generators
//! on the clock (the ticker sets each one's fast-path floor at every tick).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::rounds::{allowed_cpus, interleaved, median, pin, ratio, Contender};
use criterion::{criterion_group, Criterion};
use ferroid::generator::AtomicSnowflakeGenerator;
use ferroid::time::MonotonicClock;
use workerid::snowflake::{Clock, Generator, Layout, SystemClock, TickingClock, CLASSIC_EPOCH};

#[path = "snowflake/recorder.rs"]
mod recorder;

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
    // The first benchmark of a process can measure slow (whichever
    // generator it is): two seconds of work first.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(2) {
        black_box(ours.next_id().expect("id"));
    }
    group.bench_function("workerid", |b| {
        b.iter(|| black_box(ours.next_id().expect("id")))
    });
    let shared = Arc::new(Generator::with_system_clock(wide_layout(), 2).expect("generator"));
    let mut local = shared.local(32).expect("local handle");
    group.bench_function("workerid_local_batch_32", |b| {
        b.iter(|| black_box(local.next_id().expect("id")))
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

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();

    let cap = Layout::classic().ids_per_second();
    benches::record::say(format!(
        "\n| classic 41/10/12, one generator | IDs per second | of the cap ({:.3}M/s) | goal |",
        cap / 1e6
    ));
    benches::record::say("| --- | --- | --- | --- |");
    for threads in [1, 2] {
        let rate = throughput(threads, 8_192_000 / threads);
        let share = rate / cap * 100.0;
        let verdict = if share >= 99.0 { "met" } else { "MISSED" };
        benches::record::say(format!(
            "| {threads} thread(s) | {:.3}M | {share:.1} % | ≥ 99 % {verdict} |",
            rate / 1e6
        ));
    }

    two_threads();
    one_thread();
    ticker_cost();
    // Last: it installs a recorder for the rest of the process.
    recorder::recorder_cost();
    benches::record::record_transcript("snowflake", "cargo bench -p benches --bench snowflake");
}

/// The interleaved table of one ID on one thread (see the module's doc).
fn one_thread() {
    const ROUNDS: usize = 301;
    // ferroid's clock thread starts with its first clock, before the pin,
    // so that it does not share the measuring CPU.
    let ferroid = AtomicSnowflakeGenerator::<WideId, _>::new(1, MonotonicClock::default());
    // Likewise the ticker thread.
    let ticking = Arc::new(TickingClock::new());
    wait_for_the_first_tick(&ticking);
    let (ticks_before, ticker_cpu_before, began) =
        (ticking.ticks(), ticker_cpu_ns(), Instant::now());
    let pinned = match allowed_cpus().first() {
        Some(&cpu) if pin(cpu) => format!("pinned to CPU {cpu}"),
        _ => "not pinned".to_owned(),
    };
    let ours = Generator::with_system_clock(wide_layout(), 1).expect("generator");
    let shared = Arc::new(Generator::with_system_clock(wide_layout(), 2).expect("generator"));
    let mut local = shared.local(32).expect("local handle");
    let mut rs = snowflake::SnowflakeIdGenerator::new(1, 1);
    let clock = SystemClock::new();
    let ours_ticking = Generator::new(wide_layout(), 1, ticking.clone()).expect("generator");
    let shared_ticking =
        Arc::new(Generator::new(wide_layout(), 2, ticking.clone()).expect("generator"));
    let mut local_ticking = shared_ticking.local(32).expect("local handle");
    let (counter, counter_too, counter_bare, counter_alone) = (
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    );
    let epoch_ms = CLASSIC_EPOCH.as_millis() as u64;
    let mut contenders = [
        Contender {
            name: "workerid `Generator::next_id` (41/2/20)",
            calls: 100_000,
            call: Box::new(|| {
                black_box(ours.next_id().expect("id"));
            }),
        },
        Contender {
            name: "workerid `LocalGenerator`, batches of 32 (41/2/20)",
            calls: 100_000,
            call: Box::new(|| {
                black_box(local.next_id().expect("id"));
            }),
        },
        Contender {
            name: "ferroid `AtomicSnowflakeGenerator` (41/2/20)",
            calls: 100_000,
            call: Box::new(|| {
                black_box(ferroid.next_id(|_| std::hint::spin_loop()));
            }),
        },
        Contender {
            name: "rs-snowflake `generate` (41/5/5/12, caps at 4096/ms)",
            // Ten milliseconds' worth, so that its cap shows.
            calls: 40_960,
            call: Box::new(|| {
                black_box(rs.generate());
            }),
        },
        Contender {
            name: "one coarse clock read (`SystemClock::now_coarse_nanos`)",
            calls: 100_000,
            call: Box::new(|| {
                black_box(black_box(&clock).now_coarse_nanos());
            }),
        },
        Contender {
            name: "one atomic fetch-and-add",
            calls: 100_000,
            call: Box::new(|| {
                black_box(black_box(&counter).fetch_add(1, Ordering::AcqRel));
            }),
        },
        Contender {
            name: "both: the floor of a sound `next_id`",
            calls: 100_000,
            call: Box::new(|| {
                black_box(black_box(&clock).now_coarse_nanos());
                black_box(black_box(&counter_too).fetch_add(1, Ordering::AcqRel));
            }),
        },
        Contender {
            name: "workerid `Generator::next_id` on `TickingClock` (41/2/20)",
            calls: 100_000,
            call: Box::new(|| {
                black_box(ours_ticking.next_id().expect("id"));
            }),
        },
        Contender {
            name: "workerid `LocalGenerator` on `TickingClock`, batches of 32",
            calls: 100_000,
            call: Box::new(|| {
                black_box(local_ticking.next_id().expect("id"));
            }),
        },
        Contender {
            name: "the floor and an ID made of it, no checks (unit of the reading, counter as sequence)",
            calls: 100_000,
            call: Box::new(|| {
                let now = black_box(&clock).now_coarse_nanos();
                let seq = black_box(&counter_bare).fetch_add(1, Ordering::AcqRel) + 1;
                let unit = (now.wall / 1_000_000).saturating_sub(epoch_ms);
                black_box((unit << 22) | (1 << 20) | (seq & ((1 << 20) - 1)));
            }),
        },
        Contender {
            // No `black_box` of the atomic's address: that would store it
            // to the stack, and a locked instruction waits for every store
            // before it.
            name: "one locked instruction alone (a fetch-and-add, nothing stored before it)",
            calls: 100_000,
            call: Box::new(|| {
                black_box(counter_alone.fetch_add(1, Ordering::AcqRel));
            }),
        },
    ];
    // Warm-up on the pinned CPU: the first rounds of a process measure slow.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(2) {
        interleaved(1, &mut contenders);
    }
    let samples = interleaved(ROUNDS, &mut contenders);
    let (ours, local, ferroid) = (&samples[0], &samples[1], &samples[2]);
    benches::record::say(format!(
        "\n| one ID, a layout that does not cap ({ROUNDS} interleaved rounds, {pinned}) \
         | ns per ID, median | best round | × ferroid (median of the rounds' ratios) |"
    ));
    benches::record::say("| --- | --- | --- | --- |");
    for (c, s) in contenders.iter().zip(&samples) {
        let best = s.iter().copied().fold(f64::MAX, f64::min);
        benches::record::say(format!(
            "| {} | {:.2} | {best:.2} | {:.2}x |",
            c.name,
            median(s),
            ratio(s, ferroid)
        ));
    }
    let goal = ratio(ours, ferroid);
    let verdict = if goal <= 1.0 { "met" } else { "MISSED" };
    benches::record::say("\n| goal | measured | verdict |");
    benches::record::say("| --- | --- | --- |");
    benches::record::say(format!(
        "| `Generator::next_id` ≤ 1.0x ferroid | {goal:.3}x | {verdict} |"
    ));
    benches::record::say(format!(
        "| (`LocalGenerator::next_id`, for reference) | {:.3}x | |",
        ratio(local, ferroid)
    ));
    benches::record::say(format!(
        "| (the floor, a coarse read and a fetch-and-add) | {:.3}x | |",
        ratio(&samples[6], ferroid)
    ));
    let ticking_goal = ratio(&samples[7], ferroid);
    let ferroid_on_lock = ratio(ferroid, &samples[10]);
    benches::record::say(format!(
        "| `Generator::next_id` on `TickingClock` ≤ 1.0x ferroid | {ticking_goal:.3}x | {} |",
        benches::rounds::ticking_verdict(ticking_goal, ferroid_on_lock)
    ));
    benches::record::say(format!(
        "| (ferroid against one locked instruction alone, the least an ID of a generator shared across threads costs) | {ferroid_on_lock:.3}x | |"
    ));
    benches::record::say(format!(
        "| (`Generator::next_id` on `TickingClock` against the same) | {:.3}x | |",
        ratio(&samples[7], &samples[10])
    ));
    let floor = ratio(ours, &samples[6]);
    benches::record::say(format!(
        "| `Generator::next_id` (system clock) within 5 % of its floor | {floor:.3}x the floor | {} |",
        if floor <= 1.05 { "met" } else { "MISSED" }
    ));
    benches::record::say(format!(
        "| (the same against the floor with the ID made, no checks: what the checks cost) | {:.3}x | |",
        ratio(ours, &samples[9])
    ));
    let local_goal = ratio(&samples[8], ferroid);
    benches::record::say(format!(
        "| `LocalGenerator` on `TickingClock` below ferroid | {local_goal:.3}x | {} |",
        if local_goal < 1.0 { "met" } else { "MISSED" }
    ));
    benches::record::say(format!(
        "| (`LocalGenerator` on the system clock, whose floor is a clock read: {:.3}x the read) | {:.3}x | |",
        ratio(local, &samples[4]),
        ratio(local, ferroid)
    ));
    let seconds = began.elapsed().as_secs_f64();
    let wakeups = (ticking.ticks() - ticks_before) as f64 / seconds;
    let cpu = match (ticker_cpu_before, ticker_cpu_ns()) {
        (Some(before), Some(after)) => {
            format!(
                "{:.2} % of a CPU",
                (after - before) as f64 / 1e9 / seconds * 100.0
            )
        }
        _ => "unknown (no /proc)".to_owned(),
    };
    benches::record::say(format!(
        "\nThe ticker (period {:?}): {wakeups:.0} wake-ups per second, {cpu}, over {seconds:.1} s.",
        ticking.period()
    ));
}

/// The ticker's cost by how many generators it keeps (it sets each one's
/// fast-path floor at every tick): wake-ups per second and its share of a
/// CPU over two seconds, with nothing else running.
fn ticker_cost() {
    const SECONDS: f64 = 2.0;
    benches::record::say(
        "\n| generators on one `TickingClock` | ticker wake-ups per second | ticker's share of a CPU |",
    );
    benches::record::say("| --- | --- | --- |");
    for generators in [1, 100, 1_000] {
        // The tickers of clocks dropped before have ended by now: the one
        // `ticker_cpu_ns` finds is this clock's.
        std::thread::sleep(Duration::from_millis(20));
        let clock = Arc::new(TickingClock::new());
        let kept: Vec<Generator> = (0..generators)
            .map(|_| Generator::new(wide_layout(), 1, clock.clone()).expect("generator"))
            .collect();
        wait_for_the_first_tick(&clock);
        let (ticks, cpu, began) = (clock.ticks(), ticker_cpu_ns(), Instant::now());
        std::thread::sleep(Duration::from_secs_f64(SECONDS));
        let seconds = began.elapsed().as_secs_f64();
        let share = match (cpu, ticker_cpu_ns()) {
            (Some(before), Some(after)) => {
                format!("{:.2} %", (after - before) as f64 / 1e9 / seconds * 100.0)
            }
            _ => "unknown (no /proc)".to_owned(),
        };
        benches::record::say(format!(
            "| {generators} | {:.0} | {share} |",
            (clock.ticks() - ticks) as f64 / seconds
        ));
        drop(kept);
    }
}

/// Returns once `clock`'s ticker has ticked: a thread names itself once it
/// runs, and only then does `ticker_cpu_ns` find it.
fn wait_for_the_first_tick(clock: &TickingClock) {
    while clock.ticks() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// CPU time of the ticker thread so far (ns), from `/proc/self/task/*/schedstat`.
fn ticker_cpu_ns() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == "workerid-ticker" {
            let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            return schedstat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// Two threads on one generator, each on a CPU of its own: ns per ID of
/// the pair (wall time over all IDs), interleaved rounds.
fn two_threads() {
    const ROUNDS: usize = 41;
    const CALLS: u32 = 200_000;
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        return;
    }
    let ours = Generator::with_system_clock(wide_layout(), 1).expect("generator");
    let ferroid = AtomicSnowflakeGenerator::<WideId, _>::new(1, MonotonicClock::default());
    let ticking =
        Generator::new(wide_layout(), 3, Arc::new(TickingClock::new())).expect("generator");
    let ours_id = || {
        black_box(ours.next_id().expect("id"));
    };
    let ticking_id = || {
        black_box(ticking.next_id().expect("id"));
    };
    let ferroid_id = || {
        black_box(ferroid.next_id(|_| std::hint::spin_loop()));
    };
    let contenders: [(&str, &(dyn Fn() + Sync)); 3] = [
        ("workerid `Generator::next_id`", &ours_id),
        ("ferroid `AtomicSnowflakeGenerator`", &ferroid_id),
        (
            "workerid `Generator::next_id` on `TickingClock`",
            &ticking_id,
        ),
    ];
    let round = |f: &(dyn Fn() + Sync)| {
        let started = Instant::now();
        std::thread::scope(|s| {
            for &cpu in &cpus[..2] {
                s.spawn(move || {
                    pin(cpu);
                    for _ in 0..CALLS {
                        f();
                    }
                });
            }
        });
        started.elapsed().as_nanos() as f64 / f64::from(2 * CALLS)
    };
    let mut samples = vec![Vec::with_capacity(ROUNDS); contenders.len()];
    for _ in 0..ROUNDS {
        for (slot, (_, f)) in samples.iter_mut().zip(&contenders) {
            slot.push(round(*f));
        }
    }
    benches::record::say(format!(
        "\n| two threads on one generator (41/2/20, CPUs {} and {}, {ROUNDS} interleaved rounds) \
         | ns per ID, median | × ferroid (median of the rounds' ratios) |",
        cpus[0], cpus[1]
    ));
    benches::record::say("| --- | --- | --- |");
    for ((name, _), s) in contenders.iter().zip(&samples) {
        benches::record::say(format!(
            "| {name} | {:.2} | {:.2}x |",
            median(s),
            ratio(s, &samples[1])
        ));
    }
    let goal = ratio(&samples[2], &samples[1]);
    benches::record::say(format!(
        "| goal: on `TickingClock` ≤ 1.0x ferroid | {goal:.3}x | {} |",
        if goal <= 1.0 { "met" } else { "MISSED" }
    ));
}
