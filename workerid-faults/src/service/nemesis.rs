//! The service run's nemesis: faults on the servers, the store and the
//! servers' links, one at a time, each recovery measured alone.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::{ServiceConfig, ServiceFault};
use crate::clock::mono_ns;
use crate::nemesis::{nanos, Fault, NemesisEvent};
use crate::service_check::FaultEnd;
use crate::service_clients::Shared;
use crate::service_fleet::Server;
use crate::targets::Target;
use crate::timeline::{FaultWindow, Touched};

/// The nemesis of one run, and what it did.
pub(super) struct Nemesis<'a> {
    pub(super) target: &'a Target,
    pub(super) config: &'a ServiceConfig,
    pub(super) servers: &'a [Server],
    pub(super) labs: Option<&'a crate::network::Labs>,
    pub(super) shared: &'a Shared,
    pub(super) rng: StdRng,
    pub(super) events: Vec<NemesisEvent>,
    pub(super) windows: Vec<FaultWindow>,
    pub(super) counts: BTreeMap<ServiceFault, usize>,
    pub(super) dir: PathBuf,
}

impl Nemesis<'_> {
    fn log(&mut self, what: String) {
        tracing::info!("service nemesis: {what}");
        self.events.push(NemesisEvent::logged(&self.dir, what));
    }

    /// Faults until the duration has passed and every fault was injected
    /// once; after each, waits until every server (in a tight pool, as many
    /// as it has IDs) served a snowflake ID again (or the recovery bound passed), so each recovery is measured
    /// on its own.
    pub(super) fn run(&mut self) {
        let until = mono_ns() + nanos(self.config.duration);
        let mut first_round = self.config.faults.clone();
        first_round.sort();
        first_round.shuffle(&mut self.rng);
        // Let every server serve before the first fault.
        self.wait_recovered(mono_ns());
        loop {
            let gap = self.gap();
            std::thread::sleep(Duration::from_nanos(gap));
            if mono_ns() >= until && first_round.is_empty() {
                break;
            }
            if self.config.faults.is_empty() {
                continue;
            }
            let fault = match first_round.pop() {
                Some(f) => f,
                None => self.config.faults[self.rng.random_range(0..self.config.faults.len())],
            };
            let started = mono_ns();
            let (what, injected) = self.inject(fault);
            self.log(what);
            let Some((ended, touched)) = injected else {
                continue;
            };
            self.windows.push(FaultWindow {
                kind: format!("{fault:?}"),
                began: started,
                ended,
                touched,
            });
            *self.counts.entry(fault).or_default() += 1;
            self.wait_recovered(ended);
        }
    }

    /// The checker's view of the faults: when each ended, and when the
    /// next began (for the last, `run_ended`).
    pub(super) fn ends(&self, run_ended: u64) -> Vec<FaultEnd> {
        let nexts = self.windows.iter().skip(1).map(|w| w.began);
        self.windows
            .iter()
            .zip(nexts.chain(std::iter::once(run_ended)))
            .map(|(w, next)| FaultEnd {
                kind: w.kind.clone(),
                at: w.ended,
                next,
            })
            .collect()
    }

    fn gap(&mut self) -> u64 {
        let mean = nanos(self.config.fault_every);
        self.rng.random_range(mean / 2..=mean + mean / 2)
    }

    /// Waits until every server answered a snowflake request sent at or
    /// after `since`, or the recovery bound (and a second more) passed.
    fn wait_recovered(&self, since: u64) {
        let give_up = since + nanos(self.config.recovery_bound) + 1_000_000_000;
        while mono_ns() < give_up
            && self
                .shared
                .last_snowflake_sent
                .iter()
                .filter(|s| s.load(Ordering::Relaxed) >= since)
                .count()
                < self.config.serving()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server a fault goes to: any, or in a tight pool one that served
    /// a snowflake ID in the last half second (one that holds a worker ID a
    /// waiting server can take).
    fn victim(&mut self) -> usize {
        let recent = mono_ns().saturating_sub(500_000_000);
        let candidates: Vec<usize> = (0..self.servers.len())
            .filter(|&i| {
                self.config.serving() == self.servers.len()
                    || self.shared.last_snowflake_sent[i].load(Ordering::Relaxed) >= recent
            })
            .collect();
        if candidates.is_empty() {
            self.rng.random_range(0..self.servers.len())
        } else {
            candidates[self.rng.random_range(0..candidates.len())]
        }
    }

    /// Injects `fault`; returns what it did and, unless it did nothing,
    /// when it ended and whom it held up (a server as the store's client,
    /// its lab, or everyone).
    fn inject(&mut self, fault: ServiceFault) -> (String, Option<(u64, Touched)>) {
        let i = self.victim();
        let process = &self.servers[i].process;
        let server = Touched::Client(format!("s{i}"));
        match fault {
            ServiceFault::KillServer => {
                let applied =
                    crate::targets::crash_and_restart(process, &mut self.rng, &format!("s{i}"));
                (applied.what, Some((applied.ended, server)))
            }
            ServiceFault::PauseServer => {
                let applied = crate::targets::freeze(
                    process,
                    &mut self.rng,
                    self.config.ttl,
                    &format!("s{i}"),
                );
                (applied.what, Some((applied.ended, server)))
            }
            ServiceFault::TermServer => {
                let at = mono_ns();
                process.stop();
                let stopped = (mono_ns() - at) as f64 / 1e9;
                let ended = mono_ns();
                process.start();
                let took = (mono_ns() - ended) as f64 / 1e9;
                let what = format!(
                    "SIGTERM s{i}, stopped in {stopped:.1} s, listening again in {took:.1} s"
                );
                (what, Some((ended, server)))
            }
            ServiceFault::RestartStore
            | ServiceFault::PauseStore
            | ServiceFault::FillStoreDisk
            | ServiceFault::FailStoreDisk
            | ServiceFault::FailStoreFsync => {
                let store_fault = match fault {
                    ServiceFault::RestartStore => Fault::RestartStore,
                    ServiceFault::PauseStore => Fault::PauseStore,
                    ServiceFault::FailStoreDisk => Fault::FailStoreDisk,
                    ServiceFault::FailStoreFsync => Fault::FailStoreFsync,
                    _ => Fault::FillStoreDisk,
                };
                let applied = self
                    .target
                    .apply(store_fault, &mut self.rng, self.config.ttl);
                (applied.what, Some((mono_ns(), Touched::Everyone)))
            }
            network => match (self.labs, network.network()) {
                (Some(labs), Some(Fault::PartitionStore)) => {
                    let (applied, _) = labs.cut_all(&mut self.rng, self.config.ttl);
                    (applied.what, Some((applied.ended, Touched::Everyone)))
                }
                (Some(labs), Some(fault)) => {
                    let (applied, _) = labs.apply_on(i, fault, &mut self.rng, self.config.ttl);
                    let what = format!("s{i}: {}", applied.what);
                    (what, Some((applied.ended, Touched::Lab(i))))
                }
                _ => (format!("{network:?} needs a network run"), None),
            },
        }
    }
}
