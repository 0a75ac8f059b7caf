//! Checks the crate's tests share.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::Notify;

use crate::{FakeClock, FieldOrder, Generator, Layout, TickingClock, CLASSIC_EPOCH};

/// A worker's generator (classic layout, worker 5, closed until opened) on
/// a ticking clock over a fake clock, ticking every `period`.
pub(crate) fn ticking_worker_generator(base: &Arc<FakeClock>, period: Duration) -> Arc<Generator> {
    let clock = Arc::new(TickingClock::over(base.clone(), period));
    let generator = Generator::new(Layout::classic(), 5, clock).unwrap();
    Arc::new(generator.closed(Arc::new(Notify::new())))
}

/// A timestamp up to `max_ts` (at least 2) drawn from `n`: within two of
/// either end as often as in between.
pub(crate) fn near_the_ends(n: u64, max_ts: u64) -> u64 {
    match n % 3 {
        0 => max_ts - (n / 3) % 3,
        1 => (n / 3) % 3,
        _ => n % (max_ts + 1),
    }
}

/// Layouts of each field order and of several field sizes.
pub(crate) fn layouts() -> Vec<Layout> {
    vec![
        Layout::classic(),
        Layout::sonyflake(),
        Layout::classic().with_field_order(FieldOrder::SequenceThenWorker),
        Layout::new(41, 2, 20, Duration::from_millis(1), CLASSIC_EPOCH).expect("layout"),
        Layout::new(41, 1, 21, Duration::from_millis(1), CLASSIC_EPOCH).expect("layout"),
    ]
}

/// Fails when two of `ids` are equal; `between` names where they came
/// from.
pub(crate) fn assert_distinct(ids: &[u64], between: &str) {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "duplicate IDs between {between}");
}

/// Joins `threads` and checks that no two of the IDs they returned are
/// equal.
pub(crate) fn assert_threads_distinct(threads: Vec<JoinHandle<Vec<u64>>>) {
    let all: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_distinct(&all, "threads");
}
