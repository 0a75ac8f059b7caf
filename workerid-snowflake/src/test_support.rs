//! Checks the crate's tests share.

use std::thread::JoinHandle;
use std::time::Duration;

use crate::{FieldOrder, Layout, CLASSIC_EPOCH};

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
