//! The processes that hold files on a file system, frozen between their
//! system calls: a fault made to the file system while they are frozen
//! lands between two of their calls, never inside one.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::process::{descendants, stat_fields};

/// How long a thread may take to stop (it finishes the system call it is
/// in first) before [`Frozen::holders_of`] gives up.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// Processes stopped (SIGSTOP) by [`Frozen::holders_of`], each thawed
/// (SIGCONT) when this is dropped, also when a panic unwinds.
#[derive(Debug)]
#[must_use = "the processes are thawed when this is dropped"]
pub(crate) struct Frozen {
    pids: Vec<u32>,
}

impl Frozen {
    /// Stops every process descended from this one that holds a file on
    /// the file system mounted at `mount` (its working or root directory,
    /// an open file, or a mapped one), and waits until every thread of
    /// each has stopped, which a thread does only once it has left the
    /// system call it was in; a thread waiting for a child it vforked
    /// cannot leave that wait while the child is stopped, and counts as
    /// stopped once the SIGSTOP is pending for it (it takes it before it
    /// runs again), in a process of one thread or of many. The processes are looked for again until a
    /// search finds none left running, so a child that a holder forked
    /// while it was being stopped is stopped too.
    ///
    /// A holder found stopped already (a server paused by a fault) is left
    /// as it is and not thawed: this must not run while a holder is being
    /// paused or resumed elsewhere. Not covered: a process that opens a
    /// file on the disk only after the last search, and an `fsync` the
    /// kernel runs for a process in a thread of its own (Linux AIO's
    /// `IOCB_CMD_FSYNC`).
    ///
    /// # Panics
    /// When `mount` is not the root of a file system of its own (every
    /// process on the machine would hold a file on the one above it), when
    /// a holder cannot be signalled, or when a thread has not stopped
    /// within 10 s.
    pub(crate) fn holders_of(mount: &Path) -> Frozen {
        let device = mounted_device(mount);
        let mut frozen = Frozen { pids: Vec::new() };
        let deadline = Instant::now() + STOP_WITHIN;
        loop {
            let mut stopped_more = false;
            for pid in descendants(std::process::id()) {
                if frozen.pids.contains(&pid)
                    || !holds_a_file_on(pid, device)
                    || every_thread_stopped(pid)
                {
                    continue;
                }
                // SAFETY: a plain syscall on a process descended from this
                // one that holds a file on the test's own file system.
                if unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) } != 0 {
                    let error = std::io::Error::last_os_error();
                    assert!(
                        error.raw_os_error() == Some(libc::ESRCH),
                        "cannot stop process {pid}, which holds a file on {}: {error}",
                        mount.display()
                    );
                    continue;
                }
                stop_each_thread(pid);
                frozen.pids.push(pid);
                stopped_more = true;
            }
            if !stopped_more {
                return frozen;
            }
            for &pid in &frozen.pids {
                while !every_thread_stopped(pid) {
                    assert!(
                        Instant::now() < deadline,
                        "process {pid}, which holds a file on {}, did not stop within \
                         {STOP_WITHIN:?} (its threads: {:?})",
                        mount.display(),
                        threads(pid)
                    );
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: a plain syscall on a process this stopped.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGCONT);
            }
        }
    }
}

/// Sends SIGSTOP to each thread of `pid` too. The process's own SIGSTOP
/// wakes one thread to take it, which then stops the others; when that one
/// waits for a child it vforked it cannot take it, and no other thread is
/// woken; when another takes it, the waiting thread shows none pending. A
/// SIGSTOP of its own keeps every thread either stopped or, while it
/// waits, with the signal pending ([`Thread::runs_nothing`]). SIGCONT
/// clears them all.
fn stop_each_thread(pid: u32) {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten();
    for task in tasks {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: a plain syscall on a thread of a process this just
        // stopped; a thread gone meanwhile is ESRCH, which is fine.
        unsafe {
            libc::syscall(libc::SYS_tgkill, pid as libc::pid_t, tid, libc::SIGSTOP);
        }
    }
}

/// The device of the file system mounted at `mount`.
///
/// # Panics
/// When `mount` is not the root of a file system of its own.
fn mounted_device(mount: &Path) -> u64 {
    let device_of = |path: &Path| {
        std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
            .dev()
    };
    let device = device_of(mount);
    assert!(
        device != device_of(&mount.join("..")),
        "{} is not a mounted file system of its own",
        mount.display()
    );
    device
}

/// Whether process `pid` has its working or root directory, an open file
/// or a mapped file on the file system of `device`. Devices are compared,
/// not paths: a process in a mount namespace of its own sees the same
/// file system under paths of its own.
fn holds_a_file_on(pid: u32, device: u64) -> bool {
    let on_device = |path: &Path| std::fs::metadata(path).is_ok_and(|meta| meta.dev() == device);
    if ["cwd", "root"]
        .iter()
        .any(|link| on_device(Path::new(&format!("/proc/{pid}/{link}"))))
    {
        return true;
    }
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| on_device(&fd.path()));
    open || std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|maps| {
        maps.lines()
            .any(|line| maps_line_device(line) == Some(device))
    })
}

/// The device of the file a line of `/proc/<pid>/maps` maps (its fourth
/// field, `major:minor` in hex), as `stat` gives it.
fn maps_line_device(line: &str) -> Option<u64> {
    let (major, minor) = line.split_whitespace().nth(3)?.split_once(':')?;
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    Some(libc::makedev(major, minor))
}

/// One thread of a process, as `/proc/<pid>/task/<tid>` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Thread {
    /// Its state letter (`R`, `S`, `D`, `T`, ...).
    state: char,
    /// The kernel function it waits in (`wchan`), if it shows one.
    waits_in: String,
    /// Whether a SIGSTOP is pending for it or for its process.
    stop_pending: bool,
}

impl Thread {
    /// Whether it runs no code of its own until it is continued: stopped
    /// by a signal (`T`, not a tracer's `t`, which a tracer may let into a
    /// call at any time) or gone; or waiting, with a SIGSTOP pending, for a
    /// child it vforked to exec or exit (dash and `posix_spawn` vfork). Such
    /// a thread cannot stop while it waits, and its child, which holds the
    /// same files, may be stopped before its exec; it takes the SIGSTOP
    /// before it runs again.
    fn runs_nothing(&self) -> bool {
        matches!(self.state, 'T' | 'Z' | 'X')
            || (self.state == 'D' && self.waits_for_vforked_child() && self.stop_pending)
    }

    /// Whether it waits in the kernel for a child it vforked to exec or
    /// exit: in `wait_for_vfork_done`, or in `kernel_clone` where the
    /// kernel inlines that.
    fn waits_for_vforked_child(&self) -> bool {
        matches!(
            self.waits_in.as_str(),
            "wait_for_vfork_done" | "kernel_clone"
        )
    }
}

/// SIGSTOP's bit in the signal masks of `/proc/<pid>/status`.
const SIGSTOP_BIT: u64 = 1 << (libc::SIGSTOP - 1);

/// The threads of `pid` (`/proc/<pid>/task/*`); empty once the process is
/// gone.
fn threads(pid: u32) -> Vec<Thread> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| {
            let read = |file: &str| std::fs::read_to_string(task.path().join(file)).ok();
            let state = state_of(&read("stat")?)?;
            let pending = read("status").map_or(0, |status| {
                status
                    .lines()
                    .filter_map(|line| {
                        let mask = line
                            .strip_prefix("SigPnd:")
                            .or_else(|| line.strip_prefix("ShdPnd:"))?;
                        u64::from_str_radix(mask.trim(), 16).ok()
                    })
                    .fold(0, |all, mask| all | mask)
            });
            Some(Thread {
                state,
                waits_in: read("wchan").unwrap_or_default(),
                stop_pending: pending & SIGSTOP_BIT != 0,
            })
        })
        .collect()
}

/// Whether every thread of `pid` runs no code of its own until it is
/// continued ([`Thread::runs_nothing`]), or the process is gone.
fn every_thread_stopped(pid: u32) -> bool {
    threads(pid).iter().all(Thread::runs_nothing)
}

/// The state letter of a `/proc/.../stat` line.
fn state_of(stat: &str) -> Option<char> {
    stat_fields(stat)?.next()?.chars().next()
}

#[cfg(test)]
#[path = "holders/tests.rs"]
mod tests;
