//! The nemesis's faults, one at a time, on the clients and the store.

use std::path::Path;

use rand::Rng;

use super::{has_grant, nanos, Controller, Fault};
use crate::clock::mono_ns;
use crate::network::Heal;
use crate::timeline::Touched;

impl Controller<'_> {
    /// Injects one fault; when it ends (it may still go on: a pause, whose
    /// window [`resume_due`](Controller::resume_due) ends when it thaws
    /// the client) and whom it held up, or None if there was no one to
    /// inject it on.
    pub(super) fn inject(&mut self, fault: Fault) -> Option<(u64, Touched)> {
        let touched = match fault {
            Fault::KillClient => {
                let i = self.pick(|c| !c.unsafe_mode)?;
                Self::signal(&self.clients[i], libc::SIGKILL);
                let name = self.clients[i].name.clone();
                self.log(format!("SIGKILL {name}"));
                Touched::Client(name)
            }
            Fault::PauseClient => {
                // An unsafe client once it holds its worker ID (it then
                // holds it for the whole run), else anyone.
                let dir = self.dir.clone();
                let unsafe_ones = self.pick(|c| c.unsafe_mode && has_grant(&dir, &c.name));
                let i = unsafe_ones.or_else(|| self.pick(|_| true))?;
                let ttl = nanos(self.config.ttl);
                let pause = self.rng.random_range(ttl + ttl / 2..=ttl * 5 / 2);
                Self::signal(&self.clients[i], libc::SIGSTOP);
                self.clients[i].paused_until = Some(mono_ns() + pause);
                let name = self.clients[i].name.clone();
                self.log(format!("SIGSTOP {name} for {:.1} s", pause as f64 / 1e9));
                return Some((mono_ns() + pause, Touched::Client(name)));
            }
            Fault::StepClock => {
                let i = self.pick(|_| true)?;
                let step = self.config.clock_step_ms;
                let max = self.config.max_offset_ms;
                let offset = self.clients[i].offset_ms;
                let forward = if offset + step > max {
                    false
                } else if offset - step < -max {
                    true
                } else {
                    self.rng.random_bool(0.5)
                };
                let (signal, new) = if forward {
                    (libc::SIGUSR1, offset + step)
                } else {
                    (libc::SIGUSR2, offset - step)
                };
                Self::signal(&self.clients[i], signal);
                self.clients[i].offset_ms = new;
                let name = self.clients[i].name.clone();
                self.log(format!("step the clock of {name} to {new:+} ms"));
                Touched::Client(name)
            }
            Fault::IsolateEtcdLeaderWithClients => {
                let labs = self.labs.as_ref()?;
                let applied = self.target.isolate_etcd_leader_with_clients(
                    labs,
                    &mut self.rng,
                    self.config.ttl,
                );
                self.heals.extend((0..crate::network::LABS).map(|lab| Heal {
                    fault: Fault::IsolateEtcdLeaderWithClients,
                    lab,
                    at: applied.ended,
                }));
                self.log(applied.what);
                Touched::Everyone
            }
            Fault::PartitionStore => {
                let (applied, heals) = self.labs.as_ref()?.cut_all(&mut self.rng, self.config.ttl);
                self.heals.extend(heals);
                self.log(applied.what);
                Touched::Everyone
            }
            network if Fault::NETWORK.contains(&network) => {
                // The lab of an unsafe client that holds its worker ID, as
                // for a pause, so that a run with one is sure to cut it off;
                // else of one whose clock runs at the wrong rate and holds
                // a worker ID now; else of any that holds one (cutting off
                // only clients that wait for one tests little).
                let dir = self.dir.clone();
                let unsafe_lab = self
                    .pick(|c| c.unsafe_mode && has_grant(&dir, &c.name))
                    .or_else(|| self.pick(|c| c.off_rate && holds_now(&dir, &c.name)))
                    .or_else(|| self.pick(|c| holds_now(&dir, &c.name)))
                    .and_then(|i| self.clients[i].lab);
                let labs = self.labs.as_ref()?;
                let (applied, heal) = match unsafe_lab {
                    Some(lab) => labs.apply_on(lab, network, &mut self.rng, self.config.ttl),
                    None => labs.apply(network, &mut self.rng, self.config.ttl),
                };
                let lab = heal.lab;
                self.heals.push(heal);
                self.log(applied.what);
                Touched::Lab(lab)
            }
            server => {
                let applied = self.target.apply(server, &mut self.rng, self.config.ttl);
                if let Some(at) = applied.killed_at {
                    self.restarts.push(at);
                }
                if server == Fault::IsolateEtcdLeader {
                    // Every client reached the cut-off leader: every one is
                    // judged on how soon it issues again.
                    self.heals.extend((0..crate::network::LABS).map(|lab| Heal {
                        fault: server,
                        lab,
                        at: applied.ended,
                    }));
                }
                self.log(applied.what);
                Touched::Everyone
            }
        };
        Some((mono_ns(), touched))
    }
}

/// Whether client `name`'s history says it holds a worker ID now: its last
/// grant came after its last stop, loss or crash.
pub(super) fn holds_now(dir: &Path, name: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))) else {
        return false;
    };
    let last = |kind: &str| text.rfind(&format!("\"t\":\"{kind}\""));
    let ended = ["stopped", "lost", "crash"]
        .into_iter()
        .filter_map(last)
        .max();
    last("grant").is_some_and(|grant| ended.is_none_or(|ended| grant > ended))
}
