//! The lock-free snowflake generator.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{Clock, Layout, SystemClock};
use crate::clock::OsSource;
use crate::meters::GeneratorMeters;
use crate::sync::{AtomicBool, AtomicU64, Mutex};
use crate::{Error, NextIdError, Result};
use packing::Packing;
use reading::{live_reading, span_ns, unit_since};
use system_cell::SystemCell;
pub(crate) use tick_cell::TickCell;

mod claim;
mod lease;
#[cfg(all(test, workerid_loom))]
mod loom_support;
mod packing;
mod reading;
mod system_cell;
mod tick_cell;

/// What to do when the wall clock is behind the last timestamp used, in
/// libx.net/workerid's three buckets: below `block_below`, wait until it catches up and
/// succeed; below `give_up_at`, [`Error::ClockDriftTryLater`] at once; from
/// `give_up_at` on, [`Error::ClockDriftTooLarge`] (a worker then leaves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriftPolicy {
    /// Drifts shorter than this block (default 1 s, libx.net/workerid recommends 1 to 2 s).
    pub block_below: Duration,
    /// Drifts from this on are beyond recovery (default 10 s).
    pub give_up_at: Duration,
}

impl Default for DriftPolicy {
    fn default() -> Self {
        DriftPolicy {
            block_below: Duration::from_secs(1),
            give_up_at: Duration::from_secs(10),
        }
    }
}

impl DriftPolicy {
    /// The default with nothing waited out: a clock behind the last
    /// timestamp is answered with [`Error::ClockDriftTryLater`] at once
    /// (until `give_up_at`), for async code whose runtime threads must
    /// never block on a step back (the server's policy). A used-up
    /// sequence still waits for the next time unit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use workerid_snowflake::{DriftPolicy, WorkerOptions};
    /// let policy = DriftPolicy::never_wait();
    /// assert_eq!(policy.block_below, Duration::ZERO);
    /// let options = WorkerOptions::new().drift(policy);
    /// ```
    pub fn never_wait() -> Self {
        DriftPolicy {
            block_below: Duration::ZERO,
            ..DriftPolicy::default()
        }
    }
}

/// Issues snowflake IDs for one worker ID. Lock-free (one atomic
/// read-modify-write per ID: a fetch-and-add, or a compare-and-swap where a
/// new time unit starts), shared freely across threads; never wraps its
/// sequence (it waits for the next time unit), never goes back in time (see
/// [`DriftPolicy`]).
///
/// A generator made with [`Generator::new`] is open: it issues IDs for as long
/// as it lives. One inside a [`Worker`](super::Worker) issues IDs only while
/// the worker's lease is live and only within the time window the worker has
/// reserved in the store; both are checked on every call (on a
/// [`TickingClock`](crate::TickingClock), the lease by its ticker's time,
/// which may lag: the window then keeps every ID below the next holder's).
///
/// ```
/// use std::sync::Arc;
/// use workerid_snowflake::{Generator, Layout, SystemClock};
/// let generator = Generator::new(Layout::classic(), 7, Arc::new(SystemClock::new())).unwrap();
/// let a = generator.next_id().unwrap();
/// let b = generator.next_id().unwrap();
/// assert!(b > a);
/// assert_eq!(Layout::classic().decompose(b).worker_id, 7);
/// ```
#[derive(Debug)]
pub struct Generator {
    layout: Layout,
    worker_id: u32,
    clock: Arc<dyn Clock>,
    /// The same clock when it is the [`SystemClock`] and `span_ns` is not 0,
    /// so the hot path reads it directly (inlined) rather than through the
    /// vtable and checks the unit without a division; otherwise the trait's
    /// reading serves every path.
    system: Option<Arc<SystemClock>>,
    /// On the system clock: the readings and values of `last` its fast
    /// path admits, as the last claim left them.
    system_cell: SystemCell,
    /// On a [`TickingClock`](crate::TickingClock): what its ticker keeps for this generator.
    tick: Option<Arc<TickCell>>,
    drift: DriftPolicy,
    /// The timestamp and sequence number of the last ID, as `packing`
    /// holds them.
    last: Line,
    /// The largest timestamp that may be used (inclusive).
    window_end: AtomicU64,
    /// IDs only while the clock's monotonic time is below this (ns); 0: closed.
    deadline_ns: AtomicU64,
    /// The same deadline as a [`SystemClock`]'s operating system reading
    /// (`SystemClock::os_deadline`), set with it, for the fast path.
    os_deadline: AtomicU64,
    /// The [`SystemClock`]'s `os_coarse_lag` (fixed), kept here so that a
    /// reading's checks need not go through the clock's `Arc`.
    os_lag: u64,
    /// The operating system clock of that lag, which the system clock's
    /// fast path reads.
    os_source: OsSource,
    /// Held while the deadline or the window changes (see
    /// `changing_lease`).
    changing_lease: Mutex<()>,
    /// The last deadline `open_until` set (ns), kept when the generator
    /// closes; `u64::MAX` for an open generator that never had one.
    opened_until_ns: AtomicU64,
    /// Told when the drift is beyond recovery.
    leave: Option<Arc<Notify>>,
    left: AtomicBool,
    /// The latest unit a reading of the clock was in (a coarse reading is
    /// never ahead), kept by `claim`.
    seen: AtomicU64,
    /// The value of `last` when [`seal`](Generator::seal) replaced it.
    sealed_last: AtomicU64,
    /// The layout's epoch in nanoseconds (whole milliseconds) and unit in
    /// milliseconds (units are whole milliseconds), so the hot path divides
    /// u64s.
    epoch_ns: u64,
    unit_ms: u64,
    /// A unit in nanoseconds, for the system clock's fast path; 0 for a
    /// layout whose last unit ends past 2^63 ns after its epoch (see
    /// `span_ns`), which takes no fast path on the system clock.
    span_ns: u64,
    /// Where `last` holds the timestamp and the sequence number, and how
    /// it becomes the ID.
    packing: Packing,
    meters: GeneratorMeters,
}

/// The value of `last` once sealed: above every real value (an ID never
/// sets the top bit, and the last ID of a layout that takes all 63 bits has
/// every other bit set), with every bit below the timestamp set so the fast
/// path passes it to `claim`; increments racing the seal only move it up,
/// 2^62 of them away from wrapping.
const SEALED: u64 = u64::MAX ^ (1 << 62);

/// What [`Generator::live_since_epoch_other`] gives for `None`; a reading
/// this far from the epoch (2^64 - 1 ns) goes to `claim` with it.
const NOT_LIVE: u64 = u64::MAX;

/// An atomic on a cache line of its own (two, for the adjacent-line
/// prefetcher), so that threads contending for it do not also take the
/// read-mostly fields from each other.
#[derive(Debug)]
#[repr(align(128))]
struct Line(AtomicU64);

impl std::ops::Deref for Line {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// Whole milliseconds of a duration, in a u64 (good for 584 million years).
fn millis(d: Duration) -> u64 {
    d.as_secs().saturating_mul(1_000) + u64::from(d.subsec_millis())
}

impl Generator {
    /// An open generator for `worker_id`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the worker ID does not fit the layout's
    /// worker field, or the layout is invalid.
    pub fn new(layout: Layout, worker_id: u32, clock: Arc<dyn Clock>) -> Result<Self> {
        Self::with_policy(layout, worker_id, clock, DriftPolicy::default())
    }

    /// Like [`Generator::new`], with a drift policy.
    ///
    /// # Errors
    /// As [`Generator::new`], and for a policy whose `block_below` exceeds `give_up_at`.
    pub fn with_policy(
        layout: Layout,
        worker_id: u32,
        clock: Arc<dyn Clock>,
        drift: DriftPolicy,
    ) -> Result<Self> {
        layout.validate(std::time::UNIX_EPOCH + clock.now().wall)?;
        if worker_id > layout.max_worker_id() {
            return Err(Error::invalid_config(format!(
                "worker ID {worker_id} does not fit the layout's {} worker bits",
                layout.worker_bits()
            )));
        }
        if drift.block_below > drift.give_up_at {
            return Err(Error::invalid_config(format!(
                "drift policy: block_below {:?} exceeds give_up_at {:?}",
                drift.block_below, drift.give_up_at
            )));
        }
        let any: Arc<dyn Any + Send + Sync> = clock.clone();
        let packing = Packing::new(&layout, worker_id);
        let epoch_ns = millis(layout.epoch()).saturating_mul(1_000_000);
        let unit_ms = millis(layout.unit());
        let span_ns = span_ns(unit_ms, layout.max_timestamp());
        let system = any
            .clone()
            .downcast::<SystemClock>()
            .ok()
            .filter(|_| span_ns != 0);
        let tick = clock.stored_time().map(|stored| {
            TickCell::new(stored, packing, epoch_ns, unit_ms, layout.max_timestamp())
        });
        // `next_id` tries the ticking path before the system clock's.
        debug_assert!(system.is_none() || tick.is_none());
        let os_lag = system.as_ref().map_or(0, |s| s.os_coarse_lag());
        Ok(Generator {
            layout,
            worker_id,
            clock,
            system,
            system_cell: SystemCell::default(),
            tick,
            drift,
            last: Line(AtomicU64::new(packing.pack(0, 0))),
            window_end: AtomicU64::new(layout.max_timestamp()),
            deadline_ns: AtomicU64::new(u64::MAX),
            os_deadline: AtomicU64::new(u64::MAX),
            os_lag,
            os_source: SystemClock::os_source(os_lag),
            changing_lease: Mutex::new(()),
            opened_until_ns: AtomicU64::new(u64::MAX),
            leave: None,
            left: AtomicBool::new(false),
            seen: AtomicU64::new(0),
            sealed_last: AtomicU64::new(0),
            epoch_ns,
            unit_ms,
            span_ns,
            packing,
            meters: GeneratorMeters::new(),
        })
    }

    /// A generator with the system clock (for tests and benchmarks of others).
    ///
    /// # Errors
    /// As [`Generator::new`].
    pub fn with_system_clock(layout: Layout, worker_id: u32) -> Result<Self> {
        Self::new(layout, worker_id, Arc::new(SystemClock::new()))
    }

    pub(crate) fn closed(mut self, leave: Arc<Notify>) -> Self {
        self.deadline_ns = AtomicU64::new(0);
        self.os_deadline = AtomicU64::new(0);
        self.opened_until_ns = AtomicU64::new(0);
        if let Some(tick) = &self.tick {
            tick.set(0, self.layout.max_timestamp());
        }
        self.leave = Some(leave);
        self
    }

    /// The layout.
    #[inline]
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The worker ID in every ID.
    #[inline]
    pub fn worker_id(&self) -> u32 {
        self.worker_id
    }

    /// The next ID (libx.net/workerid's `Next`). Blocks the calling thread for at most
    /// one time unit when the sequence is exhausted (or the last ID is less
    /// than a unit ahead of the clock), and for at most `block_below` when
    /// the clock went back a little.
    ///
    /// # Errors
    /// [`NextIdError::NotReady`] when closed, past the lease deadline, or
    /// past the reserved window; [`NextIdError::ClockDriftTryLater`] and
    /// [`NextIdError::ClockDriftTooLarge`] per the [`DriftPolicy`].
    // Always: a caller that calls it from several places may otherwise get
    // an out-of-line copy, a call more per ID.
    #[inline(always)]
    pub fn next_id(&self) -> Result<u64, NextIdError> {
        if let Some(tick) = &self.tick {
            return match self.tick_increment(tick) {
                Some(claimed) => Ok(self.packing.id(claimed)),
                None => self.next_id_checked(),
            };
        }
        // The rest is laid out after the ticking path, whose code then
        // stays together from the entry to its return instead of jumping
        // past the system path's. The system path's first check is a taken
        // branch either way.
        std::hint::cold_path();
        if self.system.is_some() {
            // Inlined too: it keeps nothing in a register across its calls,
            // so where `next_id` is inlined the ticking path above still
            // runs with no register saved on the stack before its locked
            // instruction.
            return self.system_increment(
                |this, claimed| Ok(this.packing.id(claimed)),
                Generator::next_id_claimed,
            );
        }
        self.next_id_checked()
    }

    /// [`next_id`](Generator::next_id) on a clock other than the system
    /// clock, and on a ticking clock whose fast path did not take the call:
    /// from a reading of the clock
    /// ([`increment_checked`](Generator::increment_checked)), never through
    /// the ticking path again.
    #[inline(never)]
    fn next_id_checked(&self) -> Result<u64, NextIdError> {
        match self.increment_checked() {
            Some(claimed) => Ok(self.packing.id(claimed)),
            None => self.next_id_claimed(),
        }
    }

    /// An ID from [`claim`](Generator::claim), which handles every case.
    #[cold]
    #[inline(never)]
    fn next_id_claimed(&self) -> Result<u64, NextIdError> {
        let (ts, seq, _) = self.claim(1)?;
        Ok(self.packing.id(self.packing.pack(ts, seq)))
    }

    /// The common case of [`next_id`](Generator::next_id) in one atomic
    /// increment of `last`, whose new value it returns: the lease is live
    /// by the coarse clock, the clock is in the last ID's unit, the unit is
    /// in the window and has sequence numbers left. On the system clock
    /// the cell its claims keep ([`system_increment`](Generator::system_increment))
    /// decides; on a ticking clock its ticker's cell checks all of it in
    /// one comparison; otherwise (and on every other clock)
    /// [`increment_checked`](Generator::increment_checked) decides, which
    /// also takes a unit within the coarse clock's lag that a reading has
    /// been in. `None` sends the caller to [`claim`](Generator::claim),
    /// which handles every case.
    /// A fetch-and-add rather than a compare-and-swap of the loaded value:
    /// it does not wait for that load, and contending threads never retry.
    /// An increment that raced past the checked unit (another thread's new
    /// unit, or a carry out of an exhausted sequence) is given up: that
    /// number is never issued. `last` holds the ID itself but for the
    /// worker field (see [`Packing`]), so nothing but an exclusive or
    /// follows the increment to make the ID.
    #[cfg(test)]
    fn increment(&self) -> Option<u64> {
        if let Some(tick) = &self.tick {
            return self
                .tick_increment(tick)
                .or_else(|| self.increment_checked());
        }
        if self.system.is_some() {
            return self.system_increment(|_, claimed| Some(claimed), |_| None);
        }
        self.increment_checked()
    }

    /// [`increment`](Generator::increment) with every check, from a new
    /// reading of the clock: every ID on a clock other than the system and
    /// ticking ones, and otherwise when the clock has left the last ID's
    /// unit or a check failed. Out of line, so that it takes no registers
    /// from the fast paths.
    #[inline(never)]
    fn increment_checked(&self) -> Option<u64> {
        let packing = &self.packing;
        let (since, behind) = self.live_since_epoch()?;
        let current = self.last.load(Ordering::Relaxed);
        let last_ts = packing.ts(current);
        if !packing.issuable(current) || last_ts > self.window_end.load(Ordering::Acquire) {
            return None;
        }
        let now_ts = self.unit_since(since);
        if last_ts != now_ts
            && !(last_ts > now_ts
                && last_ts <= self.unit_since(since.saturating_add(behind))
                && last_ts <= self.seen.load(Ordering::Acquire))
        {
            return None;
        }
        self.fetch_add_in_unit(current)
    }

    /// The increment of `last`, whose value was `current`, when it stays in
    /// `current`'s unit: the new value, or `None` when it raced past it.
    #[inline(always)]
    fn fetch_add_in_unit(&self, current: u64) -> Option<u64> {
        let (step, end) = (self.packing.step(), self.packing.unit_end(current));
        let next = self
            .last
            .fetch_add(step, Ordering::AcqRel)
            .wrapping_add(step);
        if next > end {
            std::hint::cold_path();
            return None;
        }
        Some(next)
    }

    /// A coarse reading of the wall time since the layout's epoch and how
    /// far behind the precise one it may be (both in ns), when the lease is
    /// surely live by it; `None` near or past the deadline and before the
    /// epoch, which sends the fast paths to [`claim`](Generator::claim).
    /// On the [`SystemClock`] the operating system's reading is compared
    /// with the deadline converted to its terms, and one addition makes the
    /// time since the epoch: nothing else between the reading and the
    /// fetch-and-add.
    #[inline(always)]
    pub(crate) fn live_since_epoch(&self) -> Option<(u64, u64)> {
        if let Some(system) = &self.system {
            // The loads before the reading: it is a call the compiler
            // cannot see into, so a load after it would wait for it.
            let deadline = self.os_deadline.load(Ordering::Acquire);
            let to_since = system.os_to_since(self.epoch_ns);
            let os = SystemClock::os_coarse(self.os_lag);
            return live_reading(os, deadline, to_since, self.os_lag);
        }
        if let Some(tick) = &self.tick {
            let (mono, wall) = tick.stored().read();
            return (mono < tick.deadline() && wall >= self.epoch_ns)
                .then(|| (wall - self.epoch_ns, tick.stored().lag()));
        }
        let (since, behind) = self.live_since_epoch_other();
        (since != NOT_LIVE).then_some((since, behind))
    }

    /// [`live_since_epoch`](Generator::live_since_epoch) on any other
    /// clock, through its vtable; `NOT_LIVE` for `None`. Out of line and in
    /// two registers: the clock's reading comes back through memory, and
    /// merged into the fast paths' readings it would send theirs through
    /// memory too.
    #[inline(never)]
    fn live_since_epoch_other(&self) -> (u64, u64) {
        let deadline = self.deadline_ns.load(Ordering::Acquire);
        let now = self.clock.now_coarse_nanos();
        match now.wall.checked_sub(self.epoch_ns) {
            Some(since) if now.mono.saturating_add(now.behind) < deadline => (since, now.behind),
            _ => (NOT_LIVE, 0),
        }
    }

    /// On a [`TickingClock`](crate::TickingClock): what its ticker keeps for this generator.
    #[inline(always)]
    pub(crate) fn tick_cell(&self) -> Option<&Arc<TickCell>> {
        self.tick.as_ref()
    }

    /// The unit base a [`TickCell`] has while `ts` is the current unit.
    pub(crate) fn unit_base(&self, ts: u64) -> u64 {
        self.packing.pack(ts, 0)
    }

    /// The time unit of a time since the layout's epoch in nanoseconds.
    #[inline(always)]
    pub(crate) fn unit_since(&self, since_ns: u64) -> u64 {
        unit_since(since_ns, self.unit_ms)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod edge_tests;

#[cfg(test)]
mod gate_tests;
