//! The atomics and locks the generator's shared state is made of: the
//! standard library's, or in the tests under `--cfg workerid_loom` the loom
//! model checker's, so that its models (the `loom_tests` modules,
//! `scripts/loom.sh`) run the real code in the interleavings, and with the
//! values of each atomic load, that loom explores (up to three
//! preemptions). A configuration of our own, not `loom`: tokio takes
//! `cfg(loom)` to mean a loom of its own.

#[cfg(not(all(test, workerid_loom)))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
#[cfg(not(all(test, workerid_loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(all(test, workerid_loom))]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
#[cfg(all(test, workerid_loom))]
pub(crate) use loom::sync::{Mutex, MutexGuard};
