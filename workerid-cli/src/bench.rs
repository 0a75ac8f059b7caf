//! `bench`: acquire / renew / release latency from where the operator sits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::CliError;
use crate::store::open;
use serde::Serialize;
use workerid::{Allocator, LeaseOptions, Namespace};

use crate::args::BenchArgs;
use crate::render::{latency, table};

/// The lease length the bench asks for: long enough never to expire mid-cycle.
const TTL: Duration = Duration::from_secs(30);

#[derive(Debug, Serialize)]
struct Stats {
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

/// Percentiles of `samples` (sorted here), nearest-rank.
fn stats(samples: &mut [Duration]) -> (Duration, Duration, Duration) {
    samples.sort_unstable();
    let rank = |p: usize| {
        let n = samples.len();
        let i = (n * p).div_ceil(100).clamp(1, n) - 1;
        samples[i]
    };
    (rank(50), rank(99), samples[samples.len() - 1])
}

fn us(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

#[derive(Debug, Serialize)]
struct BenchJson {
    store: &'static str,
    namespace: String,
    /// What became of the namespace.
    cleanup: String,
    rounds: u32,
    acquire: Stats,
    renew: Stats,
    release: Stats,
}

/// `workerid bench`.
pub async fn bench(args: &BenchArgs, json: bool) -> Result<String, CliError> {
    Namespace::new(args.namespace.as_str())?;
    let stores = open(args.store.target(), false).await?;
    let options = LeaseOptions::new()
        .worker_bits(10)
        .max_lease_time(TTL)
        .ttl(TTL);
    let allocator = Allocator::from_arc(stores.lease_store(), &args.namespace, options)?;
    // A namespace that exists may be a live pool: its free IDs are not the
    // bench's to take. Only a namespace this run makes is removed
    // afterwards; without a listing it cannot tell, and leaves it.
    let listing = allocator.list().await;
    if matches!(&listing, Ok(listing) if listing.is_known()) {
        return Err(CliError::Refused(format!(
            "namespace {} exists and may be in use: bench measures in a namespace of its own \
             and removes it afterwards (name a new one with --namespace)",
            args.namespace
        )));
    }
    let made_here = listing.is_ok();
    // Ctrl-C ends the run after the cycle in flight, which releases its ID,
    // so that the namespace is still removed.
    let interrupted = Arc::new(AtomicBool::new(false));
    let watch = tokio::spawn({
        let interrupted = interrupted.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupted.store(true, Ordering::Relaxed);
            }
        }
    });
    let measured = cycles(&allocator, args.rounds as usize, &interrupted).await;
    watch.abort();
    let cleanup = if made_here {
        match allocator
            .store()
            .remove_namespace(allocator.namespace())
            .await
        {
            Ok(_) => format!("namespace {} removed", args.namespace),
            Err(e) => format!("namespace {} left in the store: {e}", args.namespace),
        }
    } else {
        format!(
            "namespace {} was there before: left as it is",
            args.namespace
        )
    };
    let measured = match measured {
        Err(CliError::Interrupted(said)) => {
            return Err(CliError::Interrupted(format!("{said}; {cleanup}")))
        }
        measured => measured?,
    };
    let [acquire, renew, release] = measured.map(|mut samples| stats(&mut samples));
    let scheme = stores.kind().name();
    if json {
        let to_json = |(p50, p99, max): (Duration, Duration, Duration)| Stats {
            p50_us: us(p50),
            p99_us: us(p99),
            max_us: us(max),
        };
        let out = BenchJson {
            store: scheme,
            namespace: args.namespace.clone(),
            cleanup,
            rounds: args.rounds,
            acquire: to_json(acquire),
            renew: to_json(renew),
            release: to_json(release),
        };
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    let mut rows = vec![vec![
        "OPERATION".to_string(),
        "P50".into(),
        "P99".into(),
        "MAX".into(),
    ]];
    for (name, (p50, p99, max)) in [("acquire", acquire), ("renew", renew), ("release", release)] {
        rows.push(vec![name.into(), latency(p50), latency(p99), latency(max)]);
    }
    Ok(format!(
        "{} rounds on {scheme}, namespace {}:\n{}{cleanup}\n",
        args.rounds,
        args.namespace,
        table(&rows)
    ))
}

/// Acquire, renew and release `rounds` times (after one warm-up cycle for
/// connections and server-side script caches): the three latencies of each.
async fn cycles(
    allocator: &Allocator,
    rounds: usize,
    interrupted: &AtomicBool,
) -> Result<[Vec<Duration>; 3], CliError> {
    let mut times = [
        Vec::with_capacity(rounds),
        Vec::with_capacity(rounds),
        Vec::with_capacity(rounds),
    ];
    // On stderr, and only when it is a terminal: piped output stays clean.
    // Cleared when dropped, on an error too.
    let progress = indicatif::ProgressBar::new(rounds as u64 + 1)
        .with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} cycles, {per_sec}, {eta} left",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
        .with_finish(indicatif::ProgressFinish::AndClear);
    for round in 0..=rounds {
        if interrupted.load(Ordering::Relaxed) {
            return Err(CliError::Interrupted(format!(
                "bench stopped after {round} of {} cycles",
                rounds + 1
            )));
        }
        progress.inc(1);
        let start = Instant::now();
        let mut lease = allocator.acquire().await?;
        let acquired = Instant::now();
        allocator.renew(&mut lease).await?;
        let renewed = Instant::now();
        allocator.release(&lease).await?;
        let released = Instant::now();
        if round > 0 {
            times[0].push(acquired - start);
            times[1].push(renewed - acquired);
            times[2].push(released - renewed);
        }
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        let (p50, p99, max) = stats(&mut samples);
        assert_eq!(
            (p50, p99, max),
            (
                Duration::from_micros(50),
                Duration::from_micros(99),
                Duration::from_micros(100)
            )
        );
        let mut one = vec![Duration::from_micros(7)];
        assert_eq!(stats(&mut one).1, Duration::from_micros(7));
    }
}
