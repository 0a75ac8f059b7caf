//! The loom model runner the workspace's models of lock-free code share
//! (`workerid-snowflake`'s generator and clocks, `workerid-segment`'s
//! cursor; `scripts/loom.sh` runs them). Empty unless built with
//! `--cfg workerid_loom`, so that the workspace's own builds never compile
//! loom.
#![deny(missing_docs)]
#![cfg(workerid_loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Checks `f` under the interleavings loom explores with up to three
/// preemptions (the bound its authors advise: most bugs need two), and
/// that some run came to `case`, the race the model is about (`f` returns
/// whether its run did): a model that never gets there checks nothing.
///
/// # Panics
/// When a run of `f` panics (an assertion of the model failed, in the
/// interleaving loom prints), or when no run came to `case`.
///
/// ```
/// use loom::sync::atomic::{AtomicU64, Ordering};
/// use loom::{sync::Arc, thread};
///
/// workerid_loom::model("the store seen", || {
///     let x = Arc::new(AtomicU64::new(0));
///     let t = { let x = x.clone(); thread::spawn(move || x.store(1, Ordering::Release)) };
///     let seen = x.load(Ordering::Acquire) == 1;
///     t.join().unwrap();
///     seen
/// });
/// ```
pub fn model(case: &str, f: impl Fn() -> bool + Sync + Send + 'static) {
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = reached.clone();
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(move || {
        if f() {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    assert!(
        reached.load(Ordering::Relaxed) > 0,
        "no run of the model came to {case}"
    );
}
