//! The atomics the cursor is made of: the standard library's, or in the
//! tests under `--cfg workerid_loom` the loom model checker's, so that its
//! models (`cursor::loom_tests`, `scripts/loom.sh`) run the real code in
//! the interleavings, and with the values of each atomic load, that loom
//! explores (up to three preemptions).

#[cfg(not(all(test, workerid_loom)))]
pub(crate) use std::sync::atomic::{fence, AtomicU64};

#[cfg(all(test, workerid_loom))]
pub(crate) use loom::sync::atomic::{fence, AtomicU64};
