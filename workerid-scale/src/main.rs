//! `workerid-scale`: N live workers on one real store; see the crate docs.

use std::time::{Duration, Instant};

use clap::Parser;
use workerid_scale::{report, run, Connect, Settings, StoreKind, Target};
use workerid_testkit::progress::Progress;

/// Keeps thousands of snowflake workers alive at once on one real store
/// (started on free loopback ports) and measures what that costs. Without
/// --workers it ramps up (1000 to 80000 by default) and stops
/// at the first count with a lapse or renewals falling behind.
/// Each step adds workers to the previous step's.
#[derive(Debug, Parser)]
#[command(name = "workerid-scale", version)]
#[command(after_help = "Examples:\n  \
    workerid-scale --store redis --workers 10000 --ttl 10 --seconds 60\n  \
    workerid-scale --store all                  # the README's sizing table (about 30 min)\n  \
    workerid-scale --quick                      # about a minute: Redis, SQLite, PostgreSQL")]
struct Args {
    /// Stores, comma-separated: memory, sqlite, redis, redis-durable,
    /// redis-cluster, etcd, etcd-cluster, postgres, mariadb, or all.
    #[arg(long, default_value = "redis")]
    store: String,
    /// One worker count instead of the ramp.
    #[arg(long)]
    workers: Option<usize>,
    /// The ramp's worker counts, comma-separated.
    #[arg(long, default_value = "1000,2000,5000,10000,20000,40000,80000")]
    ramp: String,
    /// Lease ttl in seconds (workers renew every ttl/3).
    #[arg(long, default_value_t = 10.0)]
    ttl: f64,
    /// Steady window of each step, in seconds (rounded up to whole renew periods).
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Churn window of each step, in seconds (0: no churn).
    #[arg(long, default_value_t = 12.0)]
    churn_seconds: f64,
    /// Share of the workers stopped and joined again each churn cycle.
    #[arg(long, default_value_t = 0.1)]
    churn: f64,
    /// Seconds between churn cycles.
    #[arg(long, default_value_t = 3.0)]
    churn_every: f64,
    /// Worker ID bits: each namespace holds 2^bits IDs (1..=16).
    #[arg(long, default_value_t = 10)]
    worker_bits: u8,
    /// Share of each namespace's IDs in use (the rest is churn headroom).
    #[arg(long, default_value_t = 0.5)]
    fill: f64,
    /// Joins and stops in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Join each step's workers as fast as possible instead of spreading the
    /// joins over one renew period (their renewals then come in one burst).
    #[arg(long)]
    burst: bool,
    /// The SQL pool's largest number of connections (one pool for all
    /// workers; default the store's: 10, or 1 for SQLite).
    #[arg(long)]
    max_connections: Option<u32>,
    /// How far ahead each worker reserves time, in renew periods (at least
    /// 2; default the worker's: 4, which raises the stored watermark on one
    /// renewal in three, or 6 on etcd, one in five; 2 raises it on every
    /// renewal).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..))]
    window_periods: Option<u32>,
    /// The short version, about a minute: 1000 workers, 10 s steady, 8 s churn,
    /// on Redis, SQLite and PostgreSQL unless --store says otherwise.
    #[arg(long)]
    quick: bool,
    /// Also draw the run as an SVG (renewals held and renew p99 against
    /// live workers) into this file.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
}

fn secs(s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|e| format!("{s} s: {e}"))
}

fn parse(args: &Args, store_given: bool) -> Result<(Vec<StoreKind>, Vec<usize>, Settings), String> {
    let store = if args.quick && !store_given {
        "redis,sqlite,postgres"
    } else {
        args.store.as_str()
    };
    let kinds = if store == "all" {
        StoreKind::ALL.to_vec()
    } else {
        store
            .split(',')
            .map(|s| s.trim().parse::<StoreKind>().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?
    };
    let counts = match (args.workers, args.quick) {
        (Some(n), _) => vec![n],
        (None, true) => vec![1000],
        (None, false) => args
            .ramp
            .split(',')
            .map(|n| {
                n.trim()
                    .parse::<usize>()
                    .map_err(|e| format!("--ramp {n:?}: {e}"))
            })
            .collect::<Result<_, _>>()?,
    };
    let (steady, churn) = if args.quick {
        (10.0, 8.0)
    } else {
        (args.seconds, args.churn_seconds)
    };
    let settings = Settings {
        ttl: secs(args.ttl)?,
        steady: secs(steady)?,
        churn: secs(churn)?,
        churn_fraction: args.churn,
        churn_every: secs(args.churn_every)?,
        worker_bits: args.worker_bits,
        fill: args.fill,
        concurrency: args.concurrency,
        spread_joins: !args.burst,
        window_periods: args.window_periods,
        ..Settings::default()
    };
    if !(0.0..=1.0).contains(&settings.churn_fraction) || !(0.0..=1.0).contains(&settings.fill) {
        return Err("--churn and --fill are shares, 0 to 1".into());
    }
    Ok((kinds, counts, settings))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // Each lost lease is counted and reported as a lapse; the
                // worker's own log line per lost lease would drown the table.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("error,workerid::snowflake::worker=off")
                }),
        )
        .with_writer(std::io::stderr)
        .init();
    let store_given = std::env::args().any(|a| a == "--store" || a.starts_with("--store="));
    let args = Args::parse();
    let (kinds, counts, settings) = match parse(&args, store_given) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("workerid-scale: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let started = Instant::now();
    println!(
        "workerid-scale: {} on {} core(s); ttl {:?}, renew every {:?}, steady {:?}, churn {:?} \
         ({:.0} % every {:?}), {} per namespace",
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(","),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        settings.ttl,
        settings.renew_every(),
        settings.steady,
        settings.churn,
        settings.churn_fraction * 100.0,
        settings.churn_every,
        settings.per_namespace(),
    );
    let connect = Connect {
        max_connections: args.max_connections,
    };
    let mut rows = Vec::new();
    let mut ramps = Vec::new();
    let mut failed = false;
    let steps = counts.len() as u64;
    let progress = Progress::steps(kinds.len() as u64 * steps, "scale run");
    for (done, kind) in kinds.into_iter().enumerate() {
        progress.set_step(done as u64 * steps);
        progress.message(format!("{kind}: starting"));
        let target = match Target::start(kind, connect).await {
            Ok(target) => target,
            Err(e) => {
                eprintln!("{kind}: cannot start: {e}");
                failed = true;
                continue;
            }
        };
        if let Some(version) = target.server_version() {
            progress.println(format!("- {}: the server says `{version}`", kind.title()));
        }
        let most = counts.last().copied().unwrap_or_default();
        progress.message(format!("{kind}: a ramp up to {most} workers"));
        let steps = run::ramp(&target, &counts, &settings, |step| {
            // A markdown list item, so that a recorded run reads as a list.
            progress.println(format!("- {}", report::step_line(kind, step)));
            progress.step();
        })
        .await;
        match steps {
            Ok(steps) => {
                rows.push(report::summary_row(kind, &steps));
                ramps.push((kind, steps));
            }
            Err(e) => {
                eprintln!("{kind}: {e}");
                failed = true;
            }
        }
        drop(target);
    }
    drop(progress);
    println!("\n{}", report::summary_header(&settings));
    for row in rows {
        println!("{row}");
    }
    println!("\n(ran in {:.0} s)", started.elapsed().as_secs_f64());
    if let Some(path) = &args.plot {
        let written = workerid_scale::plot::svg(&ramps)
            .and_then(|svg| std::fs::write(path, svg).map_err(Into::into));
        match written {
            Ok(()) => println!("(the plot: {})", path.display()),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                failed = true;
            }
        }
    }
    if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}
