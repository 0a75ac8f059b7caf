//! The fault run for the in-process memory store: its clients share one
//! process, each on a thread with a Tokio runtime of its own.
//!
//! Faults: [`Fault::KillClient`] (the client stops at its next batch and its
//! runtime is dropped with the worker's keeper in it: nothing is released,
//! as in a crash) and [`Fault::StepClock`]. A thread cannot be frozen from
//! outside, and the store lives and dies with the process, so pauses and
//! store restarts need the process-based runs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use workerid::memory::MemoryStore;
use workerid::snowflake::Layout;
use workerid::LeaseStore;

use crate::checker::{check, CheckOptions};
use crate::client::{self, ClientConfig, ClientEnd};
use crate::clock::{mono_ns, FaultClock};
use crate::history::{read_dir, Event, HistoryWriter};
use crate::nemesis::{client_seed, nanos, run_dir, Fault, NemesisEvent, RunConfig, RunOutcome};
use crate::run_end::RunEnd;
use crate::timeline::{FaultWindow, Timeline, Touched};
use crate::{FaultsError, Result};

struct Client {
    name: String,
    clock: Arc<FaultClock>,
    history: Arc<HistoryWriter>,
    kill: Arc<AtomicBool>,
    thread: JoinHandle<std::result::Result<(), String>>,
}

/// Runs `config.clients` clients on one [`MemoryStore`] with the faults of
/// `config` that apply in process, then checks their histories.
///
/// # Errors
/// [`FaultsError::Config`] for a fault that needs processes or a server;
/// [`FaultsError::Io`] and [`FaultsError::BadHistory`] for the histories.
pub fn run(config: &RunConfig) -> Result<RunOutcome> {
    if let Some(f) = config
        .faults
        .iter()
        .find(|f| !matches!(f, Fault::KillClient | Fault::StepClock))
    {
        return Err(FaultsError::Config(format!(
            "the in-process memory run cannot inject {f:?}"
        )));
    }
    let (dir, temp) = run_dir(config.dir.as_deref())?;
    let store: Arc<dyn LeaseStore> = Arc::new(MemoryStore::new());
    let mut rng = StdRng::seed_from_u64(config.seed);
    let start = mono_ns();
    let until = start + nanos(config.duration);
    let mut windows = Vec::new();
    let mut events = Vec::new();
    let mut log = |what: String| {
        tracing::info!("nemesis: {what}");
        events.push(NemesisEvent {
            at: mono_ns(),
            what,
        });
    };
    let mut clients: Vec<Client> = Vec::new();
    let mut next = 0usize;
    let mut client_errors = Vec::new();
    let spawn = |n: &mut usize, rng: &mut StdRng| -> Result<Client> {
        let name = format!("c{:03}", *n);
        let offset = rng.random_range(-config.max_offset_ms / 2..=config.max_offset_ms / 2);
        let client_config = ClientConfig {
            name: name.clone(),
            namespace: "faults-memory".into(),
            worker_bits: config.worker_bits,
            ttl: config.ttl,
            seed: client_seed(config.seed, *n),
            unsafe_mode: *n < config.unsafe_clients,
            ticking: config.ticking,
            hold: false,
            end: RunEnd::fixed(until),
            crash_chance: config.crash_chance,
        };
        *n += 1;
        let clock = Arc::new(FaultClock::new(offset));
        let history = Arc::new(HistoryWriter::create(&dir.join(format!("{name}.jsonl")))?);
        let kill = Arc::new(AtomicBool::new(false));
        let (store, c, h, k) = (store.clone(), clock.clone(), history.clone(), kill.clone());
        let thread = std::thread::spawn(move || client_thread(store, client_config, c, h, k));
        Ok(Client {
            name,
            clock,
            history,
            kill,
            thread,
        })
    };
    for _ in 0..config.clients {
        clients.push(spawn(&mut next, &mut rng)?);
    }
    let mut counts: BTreeMap<Fault, usize> = BTreeMap::new();
    let mean = nanos(config.fault_every);
    let mut next_fault = start + rng.random_range(mean / 2..=mean + mean / 2);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = mono_ns();
        let mut i = 0;
        while i < clients.len() {
            if clients[i].thread.is_finished() {
                let client = clients.swap_remove(i);
                let name = client.name.clone();
                match client.thread.join() {
                    Ok(Ok(())) => log(format!("client {name} ended")),
                    Ok(Err(e)) => client_errors.push(format!("{name}: {e}")),
                    Err(_) => client_errors.push(format!("{name} panicked")),
                }
                if now + nanos(config.ttl) < until {
                    clients.push(spawn(&mut next, &mut rng)?);
                }
            } else {
                i += 1;
            }
        }
        if now >= until {
            if clients.is_empty() {
                break;
            }
            // As the process nemesis does: a client that has not stopped by
            // itself long after the end is an error, not a run without end.
            if now > until + nanos(config.ttl) * 4 + 30_000_000_000 {
                let names: Vec<String> = clients.iter().map(|c| c.name.clone()).collect();
                client_errors.push(format!("clients {names:?} did not stop by themselves"));
                // Told to crash, so that none writes to its history once
                // the check reads it, should it wake.
                for client in &clients {
                    client.kill.store(true, Ordering::SeqCst);
                }
                break;
            }
            continue;
        }
        if now >= next_fault && !config.faults.is_empty() && !clients.is_empty() {
            let fault = config.faults[rng.random_range(0..config.faults.len())];
            let target = rng.random_range(0..clients.len());
            let client = &clients[target];
            match fault {
                Fault::KillClient => {
                    client.kill.store(true, Ordering::SeqCst);
                    log(format!("crash {}", client.name));
                }
                _ => {
                    // Offsets stay within plus or minus max_offset_ms.
                    let (offset, step) = (client.clock.offset_ms(), config.clock_step_ms);
                    let step = if offset + step > config.max_offset_ms {
                        -step
                    } else if offset - step < -config.max_offset_ms || rng.random_bool(0.5) {
                        step
                    } else {
                        -step
                    };
                    let offset_ms = client.clock.step(step);
                    client.history.record(&Event::Clock {
                        at: mono_ns(),
                        offset_ms,
                    })?;
                    log(format!(
                        "step the clock of {} to {offset_ms:+} ms",
                        client.name
                    ));
                }
            }
            *counts.entry(fault).or_default() += 1;
            // Both are instantaneous.
            windows.push(FaultWindow {
                kind: format!("{fault:?}"),
                began: now,
                ended: now,
                touched: Touched::Client(clients[target].name.clone()),
            });
            next_fault = mono_ns() + rng.random_range(mean / 2..=mean + mean / 2);
        }
    }
    let histories = read_dir(&dir)?;
    let report = check(&histories, &CheckOptions::new(Layout::classic()));
    if !report.is_safe() {
        if let Some(temp) = temp {
            let _ = temp.keep();
        }
    }
    Ok(RunOutcome {
        seed: config.seed,
        report,
        events,
        faults: counts,
        client_errors,
        liveness: Vec::new(),
        orphans: Vec::new(),
        timeline: Timeline::of_histories(start, mono_ns(), windows, &histories),
        dir,
    })
}

/// One in-process client: a runtime of its own; a crash forgets the worker
/// and drops the runtime, so its keeper never runs again and never releases.
fn client_thread(
    store: Arc<dyn LeaseStore>,
    config: ClientConfig,
    clock: Arc<FaultClock>,
    history: Arc<HistoryWriter>,
    kill: Arc<AtomicBool>,
) -> std::result::Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let end = runtime.block_on(client::run(store, &config, clock, &history, Some(kill)));
    match end {
        Ok(ClientEnd::Finished) => Ok(()),
        Ok(ClientEnd::Crash(worker)) => {
            std::mem::forget(worker);
            runtime.shutdown_background();
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}
