//! One client of a run: join as a worker, issue IDs for a random while, stop
//! gracefully or die without releasing, again and again, writing everything
//! to its history first.
//!
//! An **unsafe** client (the checker's teeth) holds one lease for the whole
//! run and issues from a generator of its own that ignores the lease
//! deadline, the reserved window and a lost lease, as a hand-rolled
//! snowflake with a cached worker ID would; it records the deadline and
//! window its worker believed in, which is what the checker judges.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use workerid::snowflake::{
    Clock, Error as SnowflakeError, Generator, Layout, TickingClock, Worker, WorkerOptions,
    WorkerState,
};
use workerid::{Allocator, LeaseOptions, LeaseStore};

use crate::clock::{mono_ns, FaultClock};
use crate::history::{Event, HistoryWriter};
use crate::run_end::RunEnd;
use crate::Result;

/// How long a client pauses after a failed join before it tries again, in
/// milliseconds (a random value in this range).
pub(crate) const RETRY_PAUSE_MS: std::ops::Range<u64> = 50..300;

/// How a client behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Its name (unique within a run).
    pub name: String,
    /// The namespace every client of the run shares.
    pub namespace: String,
    /// The pool: `0..2^worker_bits` (small, so IDs change hands often).
    pub worker_bits: u8,
    /// The lease ttl.
    pub ttl: Duration,
    /// Seeds its choices (session lengths, stop or crash).
    pub seed: u64,
    /// A deliberately unsafe client (see the module docs).
    pub unsafe_mode: bool,
    /// Its generators read a [`TickingClock`] over its fault clock.
    pub ticking: bool,
    /// It keeps its first lease for the whole run (no stop, no crash), as
    /// an unsafe client does.
    pub hold: bool,
    /// It stops (gracefully) once the run's end has passed.
    pub end: RunEnd,
    /// The chance that a session ends in a crash rather than a stop.
    pub crash_chance: f64,
}

impl ClientConfig {
    /// The lease options every client of a run uses.
    pub fn lease_options(&self) -> LeaseOptions {
        LeaseOptions::new()
            .worker_bits(self.worker_bits)
            .max_lease_time(self.ttl.max(Duration::from_secs(60)))
            .ttl(self.ttl)
            .request_timeout(self.ttl)
    }
}

/// How a client's run ended.
#[derive(Debug)]
pub enum ClientEnd {
    /// It reached its end instant and stopped its last worker.
    Finished,
    /// It decided to die now, without releasing: the caller must make sure
    /// the worker never releases (exit the process, or forget the worker and
    /// drop its runtime).
    Crash(Worker),
}

/// IDs asked for per batch.
const BATCH: usize = 16;

/// Runs the client until `config.end`, or until it decides to crash, or
/// until `kill` is set (then it crashes at once).
///
/// # Errors
/// [`FaultsError::Io`](crate::FaultsError::Io) when its history cannot be
/// written; [`FaultsError::Store`](crate::FaultsError::Store) for bad options.
pub async fn run(
    store: Arc<dyn LeaseStore>,
    config: &ClientConfig,
    clock: Arc<FaultClock>,
    history: &HistoryWriter,
    kill: Option<Arc<AtomicBool>>,
) -> Result<ClientEnd> {
    let (store, answered) = crate::answered::Answered::wrap(store);
    let allocator = Allocator::from_arc(store, &config.namespace, config.lease_options())?;
    let layout = Layout::classic();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let killed = || kill.as_ref().is_some_and(|k| k.load(Ordering::SeqCst));
    // One ticker for the whole run, over the clock the nemesis steps.
    let ids_clock: Arc<dyn Clock> = if config.ticking {
        Arc::new(TickingClock::over(
            clock.clone(),
            TickingClock::DEFAULT_PERIOD,
        ))
    } else {
        clock.clone()
    };
    history.record(&Event::Start {
        client: config.name.clone(),
        pid: std::process::id(),
        unsafe_mode: config.unsafe_mode,
        ticking: config.ticking,
        at: mono_ns(),
        offset_ms: clock.offset_ms(),
        rate_ppm: clock.rate_ppm(),
    })?;
    let mut lease = 0u32;
    while !config.end.passed() {
        if killed() {
            return Ok(ClientEnd::Finished);
        }
        let sent = mono_ns();
        let options = WorkerOptions::new().layout(layout).clock(ids_clock.clone());
        let joined = Worker::join(allocator.clone(), options).await;
        for event in crate::answered::take(&answered) {
            history.record(&event)?;
        }
        let worker = match joined {
            Ok(worker) => worker,
            Err(e) => {
                history.record(&Event::JoinFailed {
                    at: mono_ns(),
                    error: e.to_string(),
                    pool_full: matches!(
                        e,
                        SnowflakeError::Lease(workerid::Error::NoAvailableId { .. })
                    ),
                })?;
                tokio::time::sleep(Duration::from_millis(rng.random_range(RETRY_PAUSE_MS))).await;
                continue;
            }
        };
        let granted = mono_ns();
        let generator = worker.generator();
        history.record(&Event::Grant {
            lease,
            worker_id: worker.worker_id(),
            fence: worker.fence(),
            sent,
            granted,
            deadline: deadline_ns(generator, &clock),
            window_end: generator.window_end(),
        })?;
        let session = if config.unsafe_mode || config.hold {
            u64::MAX
        } else {
            let ttl = config.ttl.as_nanos() as u64;
            granted.saturating_add(rng.random_range(ttl / 4..ttl * 4))
        };
        let ended = || mono_ns() >= session || config.end.passed();
        // The unsafe client's own generator: no deadline, no window.
        let rogue = if config.unsafe_mode {
            let rogue = Generator::new(layout, worker.worker_id(), ids_clock.clone())?;
            rogue.set_last_used_timestamp(generator.last_used_timestamp());
            Some(rogue)
        } else {
            None
        };
        let mut lost = false;
        loop {
            if killed() {
                history.record(&Event::Crash {
                    lease: Some(lease),
                    at: mono_ns(),
                })?;
                return Ok(ClientEnd::Crash(worker));
            }
            if rogue.is_none() && ended() {
                break;
            }
            issue_batch(&worker, rogue.as_ref(), lease, &clock, history)?;
            if rogue.is_none() {
                if let WorkerState::Lost { reason } = worker.state() {
                    history.record(&Event::Lost {
                        lease,
                        at: mono_ns(),
                        reason,
                    })?;
                    lost = true;
                    break;
                }
            } else if ended() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(2..15))).await;
        }
        if !lost && !config.end.passed() && rng.random_bool(config.crash_chance) {
            history.record(&Event::Crash {
                lease: Some(lease),
                at: mono_ns(),
            })?;
            return Ok(ClientEnd::Crash(worker));
        }
        if !lost {
            history.record(&Event::Stopping {
                lease,
                at: mono_ns(),
            })?;
            let state = worker.stop().await;
            history.record(&Event::Stopped {
                lease,
                at: mono_ns(),
                state: format!("{state:?}"),
            })?;
        }
        lease += 1;
    }
    Ok(ClientEnd::Finished)
}

/// The generator's lease deadline as a `CLOCK_MONOTONIC` instant of the
/// machine (a clock at the wrong rate computes it in its own time).
fn deadline_ns(generator: &Generator, clock: &FaultClock) -> u64 {
    generator.lease_deadline().map_or(0, |d| {
        clock.real_mono_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    })
}

/// Asks for up to [`BATCH`] IDs (from the worker, or from the rogue
/// generator) and records those it got, with the instants around them.
fn issue_batch(
    worker: &Worker,
    rogue: Option<&Generator>,
    lease: u32,
    clock: &FaultClock,
    history: &HistoryWriter,
) -> Result<()> {
    let generator = worker.generator();
    let window_before = generator.window_end();
    let t0 = mono_ns();
    let mut tl = t0;
    let mut ids = Vec::with_capacity(BATCH);
    for _ in 0..BATCH {
        let before = mono_ns();
        let next = match rogue {
            Some(rogue) => rogue.next_id(),
            None => worker.next_id(),
        };
        match next {
            Ok(id) => {
                tl = before;
                ids.push(id);
            }
            Err(e) => {
                tracing::debug!("no ID: {e}");
                break;
            }
        }
    }
    let t1 = mono_ns();
    if ids.is_empty() {
        return Ok(());
    }
    history.record(&Event::Ids {
        lease,
        t0,
        tl,
        t1,
        deadline: deadline_ns(generator, clock),
        window_end: window_before.max(generator.window_end()),
        ids,
    })
}
