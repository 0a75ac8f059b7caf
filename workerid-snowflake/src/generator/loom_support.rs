//! What the loom models of the generator's cells share.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::Generator;

/// The timestamp and sequence number of `id`, a whole ID of the layout
/// with the generator's worker ID (a value of `last` carried out of range,
/// such as a sealed one, is not).
pub(super) fn parts(g: &Generator, id: u64) -> (u64, u64) {
    let p = g.layout.decompose(id);
    assert_eq!(p.worker_id, g.worker_id, "{id:#x}");
    assert_eq!(
        g.layout.compose(p.timestamp, p.worker_id, p.sequence),
        id,
        "{id:#x} is not an ID of the layout"
    );
    (p.timestamp, p.sequence)
}

/// Checks `f` under the interleavings loom explores with up to three
/// preemptions (the bound its authors advise: most bugs need two), and
/// that some run came to `case`, the race the model is about (`f` returns
/// whether its run did): a model that never gets there checks nothing.
pub(super) fn model(case: &str, f: impl Fn() -> bool + Sync + Send + 'static) {
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
