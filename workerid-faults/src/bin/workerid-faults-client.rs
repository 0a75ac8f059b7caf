//! One client of a fault run, as a real OS process (started by the
//! nemesis, see `workerid_faults::nemesis`). It opens the store from its
//! URL, then runs `workerid_faults::client::run`, writing its history.
//!
//! SIGUSR1 steps its wall clock forward by `--clock-step-ms`, SIGUSR2 back.
//! Exit codes: 0 done; 3 it chose to die without releasing (or it aborts,
//! SIGABRT); 2 an error.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};
use workerid_faults::client::{self, ClientConfig, ClientEnd};
use workerid_faults::clock::{clock_signals, mono_ns, FaultClock};
use workerid_faults::history::{Event, HistoryWriter};
use workerid_faults::run_end::RunEnd;

/// Opens the store with the timeouts an operator's tool uses: a frozen
/// store must fail calls well within a lease's ttl.
async fn open(url: &str) -> Result<workerid::AnyStore, workerid::OpenError> {
    workerid::OpenOptions::new()
        .connect_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(3))
        .max_connections(2)
        .open(url)
        .await
}

#[derive(Parser, Debug)]
#[command(about = "A client of a workerid fault run (started by the nemesis)")]
struct Args {
    /// The store's URL (redis://, etcd://, postgres://, mysql://, sqlite://).
    #[arg(long)]
    store: String,
    #[arg(long)]
    namespace: String,
    #[arg(long)]
    name: String,
    #[arg(long, default_value_t = 2)]
    worker_bits: u8,
    #[arg(long, default_value_t = 2000)]
    ttl_ms: u64,
    #[arg(long)]
    seed: u64,
    /// Stop once the CLOCK_MONOTONIC instant (ns) this file holds has
    /// passed (the nemesis may move it later while the client runs).
    #[arg(long)]
    end_file: PathBuf,
    #[arg(long, default_value_t = 0.3)]
    crash_chance: f64,
    /// The wall clock's initial offset.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    offset_ms: i64,
    #[arg(long, default_value_t = 1500)]
    clock_step_ms: i64,
    /// The history file (JSON lines).
    #[arg(long)]
    history: PathBuf,
    /// A deliberately unsafe client: ignores its deadline and window.
    #[arg(long = "unsafe")]
    unsafe_mode: bool,
    /// Make IDs on a ticking clock (a thread stores the time every
    /// millisecond): fail closed by timestamp.
    #[arg(long)]
    ticking: bool,
    /// Its clock runs this many parts per million fast (negative: slow).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    clock_rate_ppm: i64,
    /// Keep the first lease for the whole run (no stop, no crash).
    #[arg(long)]
    hold: bool,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            std::process::exit(2);
        }
    };
    let code = runtime.block_on(run(args));
    std::process::exit(code);
}

async fn run(args: Args) -> i32 {
    let history = match HistoryWriter::create(&args.history) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let end = match RunEnd::following(&args.end_file) {
        Ok(end) => end,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let clock = Arc::new(FaultClock::new(args.offset_ms).with_rate_ppm(args.clock_rate_ppm));
    for (kind, step) in [
        (SignalKind::user_defined1(), args.clock_step_ms),
        (SignalKind::user_defined2(), -args.clock_step_ms),
    ] {
        let mut stream = match signal(kind) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("cannot handle clock signals: {e}");
                return 2;
            }
        };
        let (clock, history) = (clock.clone(), history.clone());
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                let offset_ms = clock.step(step);
                let _ = history.record(&Event::Clock {
                    at: mono_ns(),
                    offset_ms,
                });
            }
        });
    }
    // The nemesis starts clients with the clock signals blocked (one sent
    // before they are handled would end the process): handled now, so
    // unblocked on this thread, which takes any that waited.
    // SAFETY: a signal-mask call on a set we own.
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &clock_signals(), std::ptr::null_mut());
    }
    // The store may be down (the nemesis restarts it): retry until the end.
    let store = loop {
        match open(&args.store).await {
            Ok(store) => break store.lease_store(),
            Err(e) if !end.passed() => {
                tracing::warn!("cannot open the store yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                eprintln!("cannot open the store: {e}");
                return 0;
            }
        }
    };
    let config = ClientConfig {
        name: args.name,
        namespace: args.namespace,
        worker_bits: args.worker_bits,
        ttl: Duration::from_millis(args.ttl_ms),
        seed: args.seed,
        unsafe_mode: args.unsafe_mode,
        ticking: args.ticking,
        hold: args.hold,
        end,
        crash_chance: args.crash_chance,
    };
    match client::run(store, &config, clock, &history, None).await {
        Ok(ClientEnd::Finished) => 0,
        Ok(ClientEnd::Crash(_worker)) => {
            // Die without releasing: no destructor runs, no task runs again
            // (half the time by abort, half by exit).
            if mono_ns().is_multiple_of(2) {
                std::process::abort();
            }
            std::process::exit(3);
        }
        Err(e) => {
            eprintln!("client {} failed: {e}", config.name);
            2
        }
    }
}
