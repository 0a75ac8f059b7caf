//! One server process: start, wait until it answers, stop, kill, restart, pause.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::cleanup;
use crate::fake_clock::FakeWallClock;

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// How to run a server: its program, arguments and readiness probe.
pub struct ServerSpec {
    program: PathBuf,
    args: Vec<OsString>,
    ready: Arc<dyn Fn() -> bool + Send + Sync>,
    ready_timeout: Duration,
    user: Option<(u32, u32)>,
    stop_signal: libc::c_int,
}

impl ServerSpec {
    /// Runs `program`; ready as soon as it is spawned unless [`ready`](Self::ready) says otherwise.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        ServerSpec {
            program: program.into(),
            args: Vec::new(),
            ready: Arc::new(|| true),
            ready_timeout: Duration::from_secs(60),
            user: None,
            stop_signal: libc::SIGTERM,
        }
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds `flag value` pairs.
    pub fn arg_pairs(mut self, pairs: &[(&str, String)]) -> Self {
        for (flag, value) in pairs {
            self.args.push(flag.into());
            self.args.push(value.into());
        }
        self
    }

    /// The probe that says the server answers (polled every 50 ms).
    pub fn ready(mut self, probe: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.ready = Arc::new(probe);
        self
    }

    /// How long to wait for the probe (default 60 s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// The signal for a graceful stop (default SIGTERM; PostgreSQL's fast
    /// shutdown is SIGINT).
    pub fn stop_signal(mut self, signal: libc::c_int) -> Self {
        self.stop_signal = signal;
        self
    }

    /// Runs the server as this (uid, gid), e.g. PostgreSQL, which refuses root.
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }
}

/// A running (or stopped) server process with a temporary directory of its own.
///
/// Dropping it kills the process and removes the directory.
pub struct ServerProcess {
    name: String,
    key: u64,
    spec: ServerSpec,
    dir: tempfile::TempDir,
    child: Mutex<Option<Child>>,
    /// Set once the server runs under libfaketime.
    fake_clock: Mutex<Option<FakeWallClock>>,
}

impl ServerProcess {
    /// Makes a fresh temporary directory, asks `build` for the spec (which may
    /// put files and data in the directory), starts the server and waits until
    /// it answers.
    ///
    /// Panics, with the end of the server's log, if it does not start.
    pub fn launch(name: &str, build: impl FnOnce(&Path) -> ServerSpec) -> ServerProcess {
        let dir = crate::small_disk::temp_dir(&format!("workerid-{name}-"));
        let spec = build(dir.path());
        let server = ServerProcess {
            name: name.to_string(),
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            spec,
            dir,
            child: Mutex::new(None),
            fake_clock: Mutex::new(None),
        };
        cleanup::register(server.key, None, server.dir.path().to_path_buf());
        server.start();
        server
    }

    /// The server's temporary directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The first line its program prints for `--version` (every server the
    /// kit runs answers it), or None if it printed nothing.
    pub fn version(&self) -> Option<String> {
        let out = std::process::Command::new(&self.spec.program)
            .arg("--version")
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map(str::to_string)
    }

    /// The process ID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child().as_ref().map(Child::id)
    }

    /// Whether the process is alive (running or paused).
    pub fn is_running(&self) -> bool {
        let mut child = self.child();
        match child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Starts the server (again) with the same directory, ports and arguments,
    /// and waits until it answers. Does nothing if it already runs.
    pub fn start(&self) {
        if self.is_running() {
            return;
        }
        let log = self.log_file();
        let mut command = Command::new(&self.spec.program);
        command
            .args(&self.spec.args)
            .current_dir(self.dir())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log file"))
            .stderr(log);
        if let Some(clock) = self.lock_fake_clock().as_ref() {
            command.envs(clock.env());
        }
        if let Some((uid, gid)) = self.spec.user {
            std::os::unix::process::CommandExt::uid(&mut command, uid);
            std::os::unix::process::CommandExt::gid(&mut command, gid);
        }
        // A process group of its own: a crash (kill) or a freeze (pause)
        // reaches every process of the server, e.g. PostgreSQL's backends.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = cleanup::spawn(command).unwrap_or_else(|e| {
            panic!("cannot start {} ({:?}): {e}", self.name, self.spec.program)
        });
        cleanup::register(self.key, Some(child.id()), self.dir().to_path_buf());
        *self.child() = Some(child);
        self.wait_ready();
    }

    /// Stops the server gracefully (its stop signal; SIGKILL after 20 s) and
    /// waits for it.
    pub fn stop(&self) {
        self.signal_group(libc::SIGCONT);
        self.signal(self.spec.stop_signal);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// Kills the server at once, as a crash would: SIGKILL to its process
    /// group and to every process descended from it that left the group
    /// (PostgreSQL's backends, whose shared memory would otherwise keep the
    /// next start from running), and waits until every one of them is gone.
    pub fn kill(&self) {
        let mut child = self.child();
        if let Some(mut c) = child.take() {
            let leader = c.id();
            let group = leader as libc::pid_t;
            let tree = kill_tree(leader);
            let _ = c.wait();
            let deadline = Instant::now() + Duration::from_secs(10);
            // SAFETY: signal 0 only asks whether any process of the group is left.
            while (unsafe { libc::kill(-group, 0) } == 0 || tree.iter().any(|p| is_live(*p)))
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        cleanup::register(self.key, None, self.dir().to_path_buf());
    }

    /// The server's wall clock, for the test to step: on first call the
    /// server is restarted (data kept) under libfaketime at offset zero,
    /// and stays on it. Its monotonic clock is left alone.
    ///
    /// Panics if the `faketime` package is not installed.
    pub fn fake_wall_clock(&self) -> FakeWallClock {
        if let Some(clock) = self.lock_fake_clock().as_ref() {
            return clock.clone();
        }
        let clock = FakeWallClock::create(self.dir().join("faketime.offset"));
        *self.lock_fake_clock() = Some(clock.clone());
        self.restart();
        clock
    }

    fn lock_fake_clock(&self) -> MutexGuard<'_, Option<FakeWallClock>> {
        self.fake_clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops and starts the server, keeping its data.
    pub fn restart(&self) {
        self.stop();
        self.start();
    }

    /// Freezes the server, every process of it (SIGSTOP): it keeps its
    /// sockets but answers nothing.
    pub fn pause(&self) {
        self.signal_group(libc::SIGSTOP);
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal_group(libc::SIGCONT);
    }

    /// Sends `signal` to the server's process group and to every process
    /// descended from it that left the group: PostgreSQL's backends call
    /// `setsid()`, so a signal to the group alone would freeze the
    /// postmaster while the backends of open connections went on answering.
    fn signal_group(&self, signal: libc::c_int) {
        if let Some(pid) = self.pid() {
            // SAFETY: plain syscalls on the process group we created and on
            // processes descended from its leader.
            unsafe {
                libc::kill(-(pid as libc::pid_t), signal);
                for descendant in descendants(pid) {
                    libc::kill(descendant as libc::pid_t, signal);
                }
            }
        }
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir().join("server.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.pid() {
            // SAFETY: a plain syscall on a child we own.
            unsafe {
                libc::kill(pid as libc::pid_t, signal);
            }
        }
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn log_file(&self) -> File {
        let path = self.dir().join("server.log");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open the server log");
        if let Some((uid, gid)) = self.spec.user {
            let _ = std::os::unix::fs::chown(&path, Some(uid), Some(gid));
        }
        file
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + self.spec.ready_timeout;
        loop {
            if (self.spec.ready)() {
                return;
            }
            if !self.is_running() {
                panic!(
                    "{} exited while starting; its log ends with:\n{}",
                    self.name,
                    self.log_tail(30)
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "{} did not answer within {:?}; its log ends with:\n{}",
                    self.name,
                    self.spec.ready_timeout,
                    self.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
        cleanup::unregister(self.key);
    }
}

impl std::fmt::Debug for ServerProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerProcess")
            .field("name", &self.name)
            .field("pid", &self.pid())
            .field("dir", &self.dir())
            .finish()
    }
}

/// Every process descended from `root` (its children, theirs, ...), read
/// from `/proc`.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Sends SIGKILL to `leader`'s process group and to every process
/// descended from it that left the group (frozen first, see
/// [`frozen_tree`]); returns those descendants.
pub(crate) fn kill_tree(leader: u32) -> Vec<u32> {
    let tree = frozen_tree(leader);
    // SAFETY: plain syscalls on the process group we created and on
    // processes descended from its leader.
    unsafe {
        libc::kill(-(leader as libc::pid_t), libc::SIGKILL);
        for pid in &tree {
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
        }
    }
    tree
}

/// Stops (SIGSTOP) `leader`'s group and every process descended from it
/// until a listing finds no process it had not stopped, so none can fork
/// between the listing and a kill; returns the descendants.
fn frozen_tree(leader: u32) -> Vec<u32> {
    // SAFETY: a plain syscall on the process group we created.
    unsafe {
        libc::kill(-(leader as libc::pid_t), libc::SIGSTOP);
    }
    let mut stopped: Vec<u32> = Vec::new();
    loop {
        let found = descendants(leader);
        let new: Vec<u32> = found
            .iter()
            .copied()
            .filter(|p| !stopped.contains(p))
            .collect();
        if new.is_empty() {
            return stopped;
        }
        for pid in new {
            // SAFETY: a plain syscall on a process descended from our child.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGSTOP);
            }
            stopped.push(pid);
        }
    }
}

/// Whether `pid` is a process that has not exited: a zombie has already
/// let go of its memory, shared memory included.
fn is_live(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat_fields(&stat)?.next()? != "Z"))
        .unwrap_or(false)
}

/// The parent of `pid`: the fourth field of `/proc/<pid>/stat`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat)?.nth(1)?.parse().ok()
}

/// The fields of a `/proc/.../stat` line after the command name in
/// parentheses (which may itself hold spaces and parentheses): the state
/// first, then the parent.
pub(crate) fn stat_fields(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

#[cfg(test)]
mod tests {
    use super::{descendants, is_live, parent_of, ServerProcess, ServerSpec};

    #[test]
    fn descendants_are_found_through_setsid() {
        // A child that starts a grandchild in a session of its own, as
        // PostgreSQL's postmaster does with its backends.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        assert_eq!(parent_of(grandchild), Some(child.id()));
        assert!(descendants(child.id()).contains(&grandchild));
        assert!(!descendants(child.id()).contains(&child.id()));
        // SAFETY: a plain syscall on the grandchild this test started.
        unsafe {
            libc::kill(grandchild as libc::pid_t, libc::SIGKILL);
        }
        child.wait().unwrap();
    }

    #[test]
    fn a_kill_ends_the_processes_that_left_the_group() {
        // The server's child writes its pid and then lives in a session of
        // its own, as PostgreSQL's backends do.
        let server = ServerProcess::launch("setsid-tree", |dir| {
            let pid_file = dir.join("grandchild.pid");
            let ready_file = pid_file.clone();
            ServerSpec::new("sh")
                .args([
                    "-c".to_string(),
                    format!("setsid sleep 300 & echo $! > {}; wait", pid_file.display()),
                ])
                .ready(move || {
                    std::fs::read_to_string(&ready_file).is_ok_and(|s| s.ends_with('\n'))
                })
        });
        let pid_file = server.dir().join("grandchild.pid");
        let grandchild: u32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(is_live(grandchild));
        server.kill();
        assert!(!is_live(grandchild), "the setsid child outlived the kill");
        assert!(!server.is_running());
    }
}
