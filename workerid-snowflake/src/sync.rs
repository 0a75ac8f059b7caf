//! The atomics and locks the generator's shared state is made of: the
//! standard library's, or in the tests under `--cfg workerid_loom` the loom
//! model checker's, so that its models (`generator::system_cell::loom_tests`,
//! `scripts/loom.sh`) explore the real code's interleavings, and the values
//! the memory model lets each atomic load see, up to a bound on
//! preemptions. A configuration of our own, not `loom`: tokio takes
//! `cfg(loom)` to mean a loom of its own.

#[cfg(not(all(test, workerid_loom)))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
#[cfg(not(all(test, workerid_loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(all(test, workerid_loom))]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
#[cfg(all(test, workerid_loom))]
pub(crate) use loom::sync::{Mutex, MutexGuard};
