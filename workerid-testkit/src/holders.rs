//! The processes that hold files on a file system, frozen between their
//! system calls: a fault made to the file system while they are frozen
//! lands between two of their calls, never inside one.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a thread may take to stop (it finishes the system call it is
/// in first) before [`Frozen::holders_of`] gives up.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// Processes stopped (SIGSTOP) by [`Frozen::holders_of`], each thawed
/// (SIGCONT) when this is dropped.
#[derive(Debug)]
pub(crate) struct Frozen {
    pids: Vec<u32>,
}

impl Frozen {
    /// Stops every process other than this one that holds a file on the
    /// file system mounted at `mount` (an open file, a mapped one, or its
    /// working directory), and waits until every thread of each has
    /// stopped, which a thread does only once it has left the system call
    /// it was in. A process that was stopped already is left as it is and
    /// is not thawed when this is dropped.
    ///
    /// # Panics
    /// When `mount` cannot be read, or a thread has not stopped within 10 s.
    pub(crate) fn holders_of(mount: &Path) -> Frozen {
        let device = std::fs::metadata(mount)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", mount.display()))
            .dev();
        let own = std::process::id();
        let holders: Vec<u32> = processes()
            .filter(|&pid| pid != own && holds_a_file_on(pid, device))
            .collect();
        let mut frozen = Frozen { pids: Vec::new() };
        for pid in holders {
            if every_thread_stopped(pid) {
                continue;
            }
            // SAFETY: a plain syscall on a process that holds a file on the
            // test's own file system.
            if unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) } == 0 {
                frozen.pids.push(pid);
            }
        }
        let deadline = Instant::now() + STOP_WITHIN;
        for &pid in &frozen.pids {
            while !every_thread_stopped(pid) {
                assert!(
                    Instant::now() < deadline,
                    "process {pid}, which holds a file on {}, did not stop within {STOP_WITHIN:?} \
                     (threads: {:?})",
                    mount.display(),
                    thread_states(pid)
                );
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        frozen
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

/// The IDs of the processes now running (their thread groups).
fn processes() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
}

/// Whether process `pid` has its working directory, an open file or a
/// mapped file on the file system of `device`. Devices are compared, not
/// paths: a process in a mount namespace of its own sees the same file
/// system under paths of its own.
fn holds_a_file_on(pid: u32, device: u64) -> bool {
    let on_device = |path: &Path| std::fs::metadata(path).is_ok_and(|meta| meta.dev() == device);
    if on_device(Path::new(&format!("/proc/{pid}/cwd"))) {
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

/// The state letter of each thread of `pid` (`/proc/<pid>/task/*/stat`);
/// empty once the process is gone.
fn thread_states(pid: u32) -> Vec<char> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter_map(|stat| state_of(&stat))
        .collect()
}

/// Whether every thread of `pid` is stopped (or gone).
fn every_thread_stopped(pid: u32) -> bool {
    thread_states(pid)
        .iter()
        .all(|state| matches!(state, 'T' | 't' | 'Z' | 'X'))
}

/// The state letter of a `/proc/.../stat` line: the first field after the
/// command name in parentheses (which may itself hold spaces and
/// parentheses).
fn state_of(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(state_of("42 (redis-server) S 1 42 42"), Some('S'));
        assert_eq!(state_of("42 (a) b) (c) T 1 42 42"), Some('T'));
        assert_eq!(state_of("42 (no state)"), None);
        assert_eq!(state_of(""), None);
    }

    #[test]
    fn a_maps_line_names_its_device() {
        let line = "7f00-7f10 rw-s 00000000 07:03 1234   /mnt/disk/db";
        assert_eq!(maps_line_device(line), Some(libc::makedev(7, 3)));
        let anonymous = "7f00-7f10 rw-p 00000000 00:00 0";
        assert_eq!(maps_line_device(anonymous), Some(libc::makedev(0, 0)));
        assert_eq!(maps_line_device("garbage"), None);
    }

    #[test]
    fn a_holder_is_frozen_and_thawed() {
        // A file system of its own: every process working on the one
        // holding the temporary directories would be frozen too.
        let disk = crate::small_disk::SmallDisk::mount(1);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(disk.path())
            .spawn()
            .unwrap();
        let frozen = Frozen::holders_of(disk.path());
        assert!(frozen.pids.contains(&child.id()), "{frozen:?}");
        assert!(every_thread_stopped(child.id()));
        drop(frozen);
        let deadline = Instant::now() + Duration::from_secs(5);
        while every_thread_stopped(child.id()) {
            assert!(Instant::now() < deadline, "the holder was not thawed");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
