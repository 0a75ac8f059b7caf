//! What the loom models of the generator's cells share.

use super::Generator;
pub(super) use workerid_loom::model;

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
