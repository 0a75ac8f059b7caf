//! CPU time and memory of processes, read from Linux's `/proc`.
//!
//! A server is a process tree: PostgreSQL forks a backend per connection, so
//! a reading sums the root and every descendant alive at that instant.
//! Memory is the proportional set size (`Pss` in `smaps_rollup`: shared
//! pages divided among the processes sharing them, so PostgreSQL's shared
//! buffers count once); where that file cannot be read, the resident set
//! (`VmRSS`). For a single process the two differ only by its share of
//! shared libraries.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The kernel's clock ticks per second (`sysconf(_SC_CLK_TCK)`, usually 100).
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// Fields of `/proc/<pid>/stat` after the command name (which may contain
/// spaces and parentheses): index 0 is the state, 1 the parent, 11 utime, 12
/// stime.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(
        rest.split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// User plus system CPU ticks of `pid`.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    Some(fields.get(11)? + fields.get(12)?)
}

/// A `kB` field of a `/proc` file, in bytes.
fn kb_field(path: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line[field.len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Memory of `pid` in bytes: PSS, else RSS.
fn memory(pid: u32) -> Option<u64> {
    kb_field(&format!("/proc/{pid}/smaps_rollup"), "Pss:")
        .or_else(|| kb_field(&format!("/proc/{pid}/status"), "VmRSS:"))
}

/// The resident set of this process in bytes (`VmRSS`): what the client's
/// memory per worker is measured with.
pub fn own_rss() -> u64 {
    kb_field("/proc/self/status", "VmRSS:").unwrap_or(0)
}

/// Hands memory this process has freed back to the system (glibc keeps freed
/// heap pages resident otherwise), so that a baseline taken after an earlier
/// store's workers were dropped is not already inflated by their pages; the
/// next workers would otherwise reuse those pages and their growth read as
/// almost nothing. A no-op outside glibc.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The machine's load average over the last minute (`/proc/loadavg`):
/// how busy the shared machine was while a window was measured.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// `roots` and all their descendants alive now.
fn tree(roots: &[u32]) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some(parent) = stat_fields(pid).and_then(|f| f.get(1).copied()) {
                if let Ok(parent) = u32::try_from(parent) {
                    children.entry(parent).or_default().push(pid);
                }
            }
        }
    }
    let mut all = roots.to_vec();
    let mut i = 0;
    while i < all.len() {
        if let Some(kids) = children.get(&all[i]) {
            all.extend(kids);
        }
        i += 1;
    }
    all
}

/// One reading of a set of processes.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    at: Instant,
    ticks: u64,
    /// Memory in bytes (sum of PSS, see the module docs).
    pub memory: u64,
    /// How many processes were counted.
    pub processes: usize,
}

impl Reading {
    /// CPU used between `earlier` and this reading, in % of one core.
    pub fn cpu_percent_since(&self, earlier: &Reading) -> f64 {
        let secs = self.at.duration_since(earlier.at).as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        let used = self.ticks.saturating_sub(earlier.ticks) as f64 / ticks_per_second();
        used / secs * 100.0
    }

    /// How long after `earlier` this reading was taken.
    pub fn elapsed_since(&self, earlier: &Reading) -> Duration {
        self.at.duration_since(earlier.at)
    }
}

/// Reads the processes given by their root pids (with their descendants).
pub fn read(roots: &[u32]) -> Reading {
    let pids = tree(roots);
    let at = Instant::now();
    let (mut ticks, mut memory_total) = (0, 0);
    for &pid in &pids {
        ticks += cpu_ticks(pid).unwrap_or(0);
        memory_total += memory(pid).unwrap_or(0);
    }
    Reading {
        at,
        ticks,
        memory: memory_total,
        processes: pids.len(),
    }
}

/// Reads this process alone (the client: every worker, and an embedded
/// store such as SQLite or memory).
pub fn read_self() -> Reading {
    let pid = std::process::id();
    Reading {
        at: Instant::now(),
        ticks: cpu_ticks(pid).unwrap_or(0),
        memory: own_rss(),
        processes: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_can_be_read() {
        let before = read_self();
        let mut x = 0u64;
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        let after = read_self();
        assert!(after.memory > 0);
        assert!(after.cpu_percent_since(&before) >= 0.0);
        assert!(load_average() >= 0.0);
        let tree = read(&[std::process::id()]);
        assert!(tree.processes >= 1 && tree.memory > 0);
    }
}
