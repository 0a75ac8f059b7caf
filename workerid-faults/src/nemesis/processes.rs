//! The client processes of a run: started with their settings, signalled,
//! reaped and replaced while the run goes on, waited for at its end.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::Rng;

use super::{client_seed, namespace, nanos, rate_of, Client, Controller, END_FILE};
use crate::clock::mono_ns;
use crate::network::Labs;
use crate::{io_error, FaultsError, Result};

impl Controller<'_> {
    /// Starts the next client process: unsafe (the checker's teeth), or
    /// holding its first lease for the run.
    pub(super) fn spawn(&mut self, unsafe_mode: bool, hold: bool) -> Result<()> {
        let n = self.next;
        self.next += 1;
        let name = format!("c{n:03}");
        let max = self.config.max_offset_ms;
        let offset_ms = self.rng.random_range(-max / 2..=max / 2);
        let seed = client_seed(self.config.seed, n);
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))
            .map_err(io_error(self.dir.join(format!("{name}.log"))))?;
        let lab = self.labs.as_ref().map(|_| Labs::of_client(n));
        let (mut command, url) = match &self.labs {
            Some(labs) => {
                let lab = Labs::of_client(n);
                let command = labs.command(lab, &self.config.client_bin);
                (command, labs.url(lab).to_string())
            }
            None => (Command::new(&self.config.client_bin), self.target.url()),
        };
        command
            .arg("--store")
            .arg(url)
            .arg("--namespace")
            .arg(namespace(self.config.seed))
            .arg("--name")
            .arg(&name)
            .arg("--worker-bits")
            .arg(self.config.worker_bits.to_string())
            .arg("--ttl-ms")
            .arg(self.config.ttl.as_millis().to_string())
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--end-file")
            .arg(self.dir.join(END_FILE))
            .arg("--crash-chance")
            .arg(self.config.crash_chance.to_string())
            .arg("--offset-ms")
            .arg(offset_ms.to_string())
            .arg("--clock-step-ms")
            .arg(self.config.clock_step_ms.to_string())
            .arg("--history")
            .arg(self.dir.join(format!("{name}.jsonl")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if unsafe_mode {
            command.arg("--unsafe");
        }
        if self.config.ticking {
            command.arg("--ticking");
        }
        if hold {
            command.arg("--hold");
        }
        if let Some(ppm) = rate_of(&self.config.clock_rates_ppm, n) {
            command.arg(format!("--clock-rate-ppm={ppm}"));
        }
        // SAFETY: prctl, sigprocmask and `clock_signals` are
        // async-signal-safe; the closure touches nothing of the parent. The
        // client dies with the controller's thread, and starts with the
        // clock signals blocked: one sent before the client handles them
        // (SIGUSR1's default action ends the process) waits until it does.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                let blocked = crate::clock::clock_signals();
                if libc::sigprocmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|source| FaultsError::Spawn {
            name: name.clone(),
            source,
        })?;
        self.log(format!(
            "start client {name} (pid {}, clock {offset_ms:+} ms{})",
            child.id(),
            if unsafe_mode { ", UNSAFE" } else { "" }
        ));
        self.clients.push(Client {
            name,
            child,
            unsafe_mode,
            lab,
            off_rate: rate_of(&self.config.clock_rates_ppm, n).is_some(),
            paused_until: None,
            offset_ms,
        });
        Ok(())
    }
    pub(super) fn signal(client: &Client, signal: libc::c_int) {
        // SAFETY: a plain syscall on a child we own and have not reaped.
        unsafe {
            libc::kill(client.child.id() as libc::pid_t, signal);
        }
    }
    /// Collects clients that exited; starts new ones while the run goes on.
    pub(super) fn reap_and_replace(&mut self) -> Result<()> {
        let mut exited = Vec::new();
        self.clients.retain_mut(|c| match c.child.try_wait() {
            Ok(Some(status)) => {
                exited.push((c.name.clone(), status, c.unsafe_mode));
                false
            }
            _ => true,
        });
        for (name, status, unsafe_mode) in exited {
            self.judge_exit(&name, status);
            if mono_ns() + nanos(self.config.ttl) < self.end.at() {
                self.spawn(unsafe_mode, false)?;
            }
        }
        Ok(())
    }
    /// Exit 0 (done), 3 (chose to crash), SIGABRT (chose to abort), SIGKILL
    /// (the nemesis): expected. Anything else is a client error.
    fn judge_exit(&mut self, name: &str, status: std::process::ExitStatus) {
        use std::os::unix::process::ExitStatusExt;
        let expected = matches!(status.code(), Some(0 | 3))
            || matches!(status.signal(), Some(libc::SIGABRT | libc::SIGKILL));
        if expected {
            self.log(format!("client {name} exited: {status}"));
        } else {
            let log =
                std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            self.client_errors
                .push(format!("{name} {status}:\n{}", tail.join("\n")));
            self.log(format!("client {name} FAILED: {status}"));
        }
    }
    /// Waits for every client to stop by itself (they stop at the end
    /// instant, finishing a join that may wait for a watermark); kills the
    /// late ones.
    pub(super) fn wait_all(&mut self) {
        let give_up = self.end.at() + nanos(self.config.ttl) * 4 + 30_000_000_000;
        while !self.clients.is_empty() {
            let _ = self.reap_and_replace();
            if mono_ns() > give_up {
                for client in &mut self.clients {
                    let _ = client.child.kill();
                    let _ = client.child.wait();
                }
                let names: Vec<String> = self.clients.iter().map(|c| c.name.clone()).collect();
                self.client_errors
                    .push(format!("clients {names:?} did not stop by themselves"));
                self.clients.clear();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
