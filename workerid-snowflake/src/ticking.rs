//! A clock a thread of its own keeps: the generator's fast path compares
//! with what the ticker found instead of reading a clock.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::clock::whole_nanos;
use crate::generator::TickCell;
use crate::sync::{AtomicU64, Mutex};
use crate::{Clock, CoarseNanos, Reading, SystemClock};

/// A clock whose cheap reading is the time a ticker thread stored at its
/// last tick. Precise readings ([`now`](Clock::now)), the wall clock's
/// resync and sleeps are those of the clock it ticks over, the
/// [`SystemClock`] unless made with [`TickingClock::over`].
///
/// At each tick the ticker also works out, for each
/// [`Generator`](crate::Generator) on the clock, the unit of the stored
/// time, whether the lease is live by it and whether the unit is within
/// the window, and stores the answer in the generator's memory as the
/// smallest value its last ID may have in that unit; a generator whose
/// lease deadline or window changes works it out again at once, and so
/// does a resync. The generator's fast path is then one load and one
/// comparison with its last ID, no clock read and no conversion, before
/// its fetch-and-add.
///
/// What stays true when the ticker is late (descheduled, the machine
/// overloaded): the cheap reading is older, never newer, so IDs carry older
/// timestamps, within the generator's reserved window as always; a full
/// sequence or a deadline near sends the generator to the precise clock.
/// What does not: between the lease deadline and the ticker's next tick an
/// ID may still be issued, with a timestamp from before the deadline. No ID
/// of a [`Worker`](crate::Worker) on it has a timestamp past its reserved
/// window, which the store keeps as the next holder's floor, so the next
/// holder's IDs are all larger: fail closed by timestamp, not by real time
/// (the default clock fails closed by real time).
///
/// ```
/// use std::sync::Arc;
/// use workerid_snowflake::{Generator, Layout, TickingClock};
/// let clock = Arc::new(TickingClock::new());
/// let generator = Generator::new(Layout::classic(), 7, clock.clone()).unwrap();
/// let a = generator.next_id().unwrap();
/// assert!(generator.next_id().unwrap() > a);
/// ```
#[derive(Debug)]
pub struct TickingClock<C: Clock = SystemClock> {
    shared: Arc<Shared<C>>,
}

#[derive(Debug)]
struct Shared<C> {
    base: Arc<C>,
    stored: Arc<Stored>,
    period: Duration,
    ticks: AtomicU64,
    /// Held while storing a reading, so a resync's reading is never
    /// overwritten by an older one the ticker took before it.
    storing: Mutex<()>,
}

/// What the ticker stores, apart from the clock it ticks over (so a
/// generator holds it whatever that clock's type).
#[derive(Debug)]
struct Stored {
    /// The base clock's reading at the last tick (ns); `NO_TICKER` in
    /// `mono_ns` when no ticker runs.
    mono_ns: AtomicU64,
    wall_ns: AtomicU64,
    /// How far behind the stored time may be when the ticker keeps up: two
    /// periods.
    behind_ns: u64,
    /// What the ticker keeps for each generator on the clock, held
    /// weakly: a dropped generator's is forgotten at the next tick.
    followers: Mutex<Vec<Weak<TickCell>>>,
}

impl Stored {
    /// Calls `f` on each follower's cell, forgetting those of dropped
    /// generators.
    fn each_follower(&self, f: impl Fn(&TickCell)) {
        let mut followers = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        followers.retain(|follower| match follower.upgrade() {
            Some(cell) => {
                f(&cell);
                true
            }
            None => false,
        });
    }
}

/// `mono_ns` of a clock without a ticker: every reading is precise.
const NO_TICKER: u64 = u64::MAX;

impl<C: Clock> Shared<C> {
    /// Stores the base clock's time, then sets the followers' cells from
    /// it. A wall time set back shuts every cell first, so that none admits
    /// the former unit once the new time is stored.
    fn store_now(&self) {
        let _storing = self.storing.lock().unwrap_or_else(|e| e.into_inner());
        let now = CoarseNanos::exact(self.base.now());
        let stored = &self.stored;
        if now.wall < stored.wall_ns.load(Ordering::Acquire) {
            stored.each_follower(|cell| cell.shut());
        }
        stored.wall_ns.store(now.wall, Ordering::Release);
        stored.mono_ns.store(now.mono, Ordering::Release);
        stored.each_follower(|cell| cell.update());
    }

    /// The stored time (the base clock's precise time when no ticker runs).
    #[inline(always)]
    fn stored(&self) -> CoarseNanos {
        let mono = self.stored.mono_ns.load(Ordering::Acquire);
        if mono == NO_TICKER {
            return CoarseNanos::exact(self.base.now());
        }
        CoarseNanos {
            mono,
            wall: self.stored.wall_ns.load(Ordering::Acquire),
            behind: self.stored.behind_ns,
        }
    }
}

impl Default for TickingClock {
    fn default() -> Self {
        Self::new()
    }
}

impl TickingClock {
    /// The default period: a millisecond, a classic layout's unit.
    pub const DEFAULT_PERIOD: Duration = Duration::from_millis(1);

    /// A clock whose ticker stores the system clock's time every millisecond.
    pub fn new() -> Self {
        Self::with_period(Self::DEFAULT_PERIOD)
    }

    /// A clock whose ticker stores the system clock's time every `period`
    /// (at least 10 µs).
    pub fn with_period(period: Duration) -> Self {
        Self::over(Arc::new(SystemClock::new()), period)
    }
}

impl<C: Clock> TickingClock<C> {
    /// A clock whose ticker stores `base`'s time every `period` (at least
    /// 10 µs): precise readings, resyncs and sleeps are `base`'s. The
    /// ticker is a thread that ends when the clock is dropped.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use workerid_snowflake::{Clock, FakeClock, TickingClock};
    /// let base = Arc::new(FakeClock::at(Duration::from_secs(1_800_000_000)));
    /// let clock = TickingClock::over(base.clone(), Duration::from_millis(1));
    /// base.advance(Duration::from_secs(5));
    /// // The stored time moves at the ticker's next tick, never ahead.
    /// assert!(clock.now_coarse().0.wall <= clock.now().wall);
    /// ```
    pub fn over(base: Arc<C>, period: Duration) -> Self {
        let period = period.max(Duration::from_micros(10));
        let shared = Arc::new(Shared {
            base,
            stored: Arc::new(Stored {
                mono_ns: AtomicU64::new(NO_TICKER),
                wall_ns: AtomicU64::new(0),
                behind_ns: whole_nanos(period).saturating_mul(2),
                followers: Mutex::new(Vec::new()),
            }),
            period,
            ticks: AtomicU64::new(0),
            storing: Mutex::new(()),
        });
        shared.store_now();
        // The loom models tick it themselves (`tick_now`).
        #[cfg(not(all(test, workerid_loom)))]
        start_ticker(&shared, period);
        TickingClock { shared }
    }

    /// Does what the ticker does at a tick, at once: the loom models'
    /// ticker.
    #[cfg(all(test, workerid_loom))]
    pub(crate) fn tick_now(&self) {
        self.shared.store_now();
    }

    /// The clock it ticks over.
    pub fn base(&self) -> &Arc<C> {
        &self.shared.base
    }

    /// The ticker's period.
    pub fn period(&self) -> Duration {
        self.shared.period
    }

    /// Ticks so far: what the ticker costs (one wake-up each).
    pub fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Relaxed)
    }
}

/// The time the ticker of a [`TickingClock`] stores, as a
/// [`Generator`](crate::Generator) holds it: the generator reads it without
/// a call through the clock, and the ticker keeps what the generator's fast
/// path compares with at each tick. Only a [`TickingClock`] whose ticker
/// runs gives one ([`Clock::stored_time`]); nothing else can be done with
/// it.
#[derive(Debug, Clone)]
pub struct StoredTime(Arc<Stored>);

impl StoredTime {
    /// The stored monotonic and wall times (ns), as
    /// [`now_coarse_nanos`](Clock::now_coarse_nanos) gives them.
    #[inline(always)]
    pub(crate) fn read(&self) -> (u64, u64) {
        (
            self.0.mono_ns.load(Ordering::Acquire),
            self.0.wall_ns.load(Ordering::Acquire),
        )
    }

    /// Has the ticker update `cell` at every tick from now on.
    pub(crate) fn follow(&self, cell: Weak<TickCell>) {
        self.0
            .followers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cell);
    }

    /// How far behind the precise time a reading may be (ns).
    pub(crate) fn lag(&self) -> u64 {
        self.0.behind_ns
    }

    /// The stored monotonic time from which the lease may be past
    /// `deadline_mono_ns` (the stored time plus its lag at or past it): a
    /// reading below it is surely before the deadline.
    pub(crate) fn deadline(&self, deadline_mono_ns: u64) -> u64 {
        deadline_mono_ns.saturating_sub(self.0.behind_ns)
    }
}

/// Starts the ticker thread of `shared`, or, if there can be none, has
/// every reading go to the base clock.
#[cfg(not(all(test, workerid_loom)))]
fn start_ticker<C: Clock>(shared: &Arc<Shared<C>>, period: Duration) {
    let (weak, stored) = (Arc::downgrade(shared), shared.stored.clone());
    let spawned = std::thread::Builder::new()
        .name("workerid-ticker".into())
        .spawn(move || tick(&weak, &stored, period));
    if let Err(e) = spawned {
        // Without a ticker the stored time would never move: every
        // reading goes to the precise clock instead.
        tracing::warn!("no ticker thread ({e}): the clock reads its base clock");
        shared.stored.mono_ns.store(NO_TICKER, Ordering::Release);
    }
}

/// The ticker: stores the time every `period` until the clock is gone.
#[cfg(not(all(test, workerid_loom)))]
fn tick<C: Clock>(shared: &Weak<Shared<C>>, stored: &Stored, period: Duration) {
    loop {
        std::thread::sleep(period);
        let Some(shared) = shared.upgrade() else {
            // A generator that still holds the stored time (through a clock
            // that handed it on) reads it frozen: its cell admits nothing,
            // so its IDs go through the checks of the general path.
            stored.each_follower(TickCell::shut);
            return;
        };
        shared.store_now();
        shared.ticks.fetch_add(1, Ordering::Relaxed);
    }
}

impl<C: Clock> Clock for TickingClock<C> {
    fn now(&self) -> Reading {
        self.shared.base.now()
    }

    fn now_coarse(&self) -> (Reading, Duration) {
        let n = self.now_coarse_nanos();
        let reading = Reading {
            mono: Duration::from_nanos(n.mono),
            wall: Duration::from_nanos(n.wall),
        };
        (reading, Duration::from_nanos(n.behind))
    }

    /// The stored reading. Its two halves may come from consecutive ticks;
    /// each is a reading the base clock gave, no older than two periods
    /// while the ticker keeps up. A base whose wall clock is set back
    /// outside [`resync`](Clock::resync) (the system clock's never is) is
    /// read at its former time until the next tick.
    #[inline]
    fn now_coarse_nanos(&self) -> CoarseNanos {
        self.shared.stored()
    }

    fn sleep(&self, duration: Duration) {
        self.shared.base.sleep(duration)
    }

    /// The base clock's resync, and its new time stored at once: a wall
    /// clock set back is never read ahead from a reading stored before.
    fn resync(&self) {
        self.shared.base.resync();
        if self.shared.stored.mono_ns.load(Ordering::Acquire) != NO_TICKER {
            self.shared.store_now();
        }
    }

    fn real_time(&self) -> bool {
        self.shared.base.real_time()
    }

    /// The stored time, while the ticker runs (it could be started, which
    /// is known for good once the clock is made).
    fn stored_time(&self) -> Option<StoredTime> {
        let stored = &self.shared.stored;
        let ticking = stored.mono_ns.load(Ordering::Acquire) != NO_TICKER;
        ticking.then(|| StoredTime(stored.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SteppedAtResync;

    #[test]
    fn the_stored_time_is_never_ahead_and_moves_on() {
        let clock = TickingClock::with_period(Duration::from_micros(200));
        let first = clock.now_coarse_nanos();
        let precise = clock.now();
        assert!(Duration::from_nanos(first.mono) <= precise.mono);
        assert_eq!(first.behind, 400_000);
        std::thread::sleep(Duration::from_millis(20));
        let later = clock.now_coarse_nanos();
        assert!(later.mono > first.mono, "the ticker stores the time");
        assert!(Duration::from_nanos(later.mono) <= clock.now().mono);
        let waited = std::time::Instant::now();
        while clock.ticks() < 3 {
            assert!(waited.elapsed() < Duration::from_secs(10), "ticks counted");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_period_is_kept_and_sleeps_are_the_base_clocks() {
        let base = Arc::new(crate::FakeClock::at(Duration::from_secs(1_800_000_000)));
        let clock = TickingClock::over(base.clone(), Duration::from_micros(300));
        assert_eq!(clock.period(), Duration::from_micros(300));
        assert_eq!(
            TickingClock::over(base.clone(), Duration::from_nanos(1)).period(),
            Duration::from_micros(10),
            "at least 10 µs"
        );
        clock.sleep(Duration::from_millis(3));
        assert_eq!(base.now().mono, Duration::from_millis(3));
    }

    #[test]
    fn a_dropped_generators_cell_is_forgotten_at_the_next_tick() {
        let clock = Arc::new(TickingClock::with_period(Duration::from_micros(100)));
        let followers = || clock.shared.stored.followers.lock().unwrap().len();
        let g = crate::Generator::new(crate::Layout::classic(), 1, clock.clone()).unwrap();
        assert_eq!(followers(), 1);
        drop(g);
        let waited = std::time::Instant::now();
        while followers() != 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(10),
                "never forgotten"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let ticks = clock.ticks();
        while clock.ticks() == ticks {
            assert!(
                waited.elapsed() < Duration::from_secs(10),
                "the ticker runs on"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_ticker_ends_with_the_clock() {
        let clock = TickingClock::with_period(Duration::from_micros(100));
        let weak = Arc::downgrade(&clock.shared);
        drop(clock);
        std::thread::sleep(Duration::from_millis(20));
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn over_any_clock_the_stored_time_follows_at_the_next_tick() {
        let base = Arc::new(crate::FakeClock::at(Duration::from_secs(1_800_000_000)));
        let clock = TickingClock::over(base.clone(), Duration::from_micros(100));
        let before = clock.now_coarse_nanos();
        assert_eq!(
            before,
            CoarseNanos {
                behind: 200_000,
                ..CoarseNanos::exact(base.now())
            }
        );
        base.advance(Duration::from_secs(1));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while clock.now_coarse_nanos().mono == before.mono {
            assert!(
                std::time::Instant::now() < deadline,
                "the ticker never ticked"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let after = clock.now_coarse_nanos();
        assert_eq!(after.mono - before.mono, 1_000_000_000);
        assert_eq!(after.wall - before.wall, 1_000_000_000);
        assert_eq!(clock.now(), base.now(), "precise readings are the base's");
    }

    #[test]
    fn a_resync_stores_the_base_clocks_new_time_at_once() {
        let base = Arc::new(SteppedAtResync::at(Duration::from_secs(1_800_000_000)));
        // A period long enough that no tick comes during the test.
        let clock = TickingClock::over(base.clone(), Duration::from_secs(3_600));
        let before = clock.now_coarse_nanos();
        base.pending_ms.store(-2_000, Ordering::SeqCst);
        clock.resync();
        let after = clock.now_coarse_nanos();
        assert_eq!(
            before.wall - after.wall,
            2_000_000_000,
            "read at once, not ahead"
        );
        assert_eq!(after.wall, CoarseNanos::exact(base.now()).wall);
    }
}
