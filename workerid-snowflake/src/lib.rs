//! # workerid-snowflake
//!
//! Snowflake IDs on a leased worker ID.
//!
//! - [`Layout`]: the bit layout (presets [`Layout::classic`] 41/10/12 ms,
//!   [`Layout::sonyflake`], [`Layout::twitter`], [`Layout::discord`],
//!   [`Layout::instagram`], [`Layout::javascript_safe`]), with `compose` /
//!   `decompose`.
//! - [`Generator`]: lock-free, one atomic read-modify-write per ID,
//!   libx.net/workerid's clock drift buckets ([`DriftPolicy`]).
//! - [`LocalGenerator`]: a per-thread handle on a generator that claims
//!   sequence numbers in batches, for the highest rates.
//! - [`Worker`]: a generator on a worker ID leased from any
//!   [`LeaseStore`](workerid_core::LeaseStore), kept alive in the background, failing
//!   closed, with a timestamp watermark in the store so that a reused worker
//!   ID never goes back in time. Once lost or stopped, a worker stays so.
//! - [`SupervisedWorker`]: a worker kept joined, joined again after a lost
//!   lease or a failed start: what a long-running service holds.
//! - [`Clock`]: [`SystemClock`] in production (fail closed by real time),
//!   [`TickingClock`] for the lowest cost per ID (fail closed by timestamp),
//!   [`FakeClock`] in tests.
//! - [`Error`]: what can go wrong, the lease's errors included.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod clock;
mod error;
mod generator;
mod layout;
mod local;
mod meters;
mod reservation;
mod supervised;
mod sync;
mod ticking;
mod worker;

pub use clock::{Clock, CoarseNanos, FakeClock, OffsetClock, Reading, SystemClock};
pub use error::{Error, NextIdError, Result};
pub use generator::{DriftPolicy, Generator};
pub use layout::{
    FieldOrder, Layout, Parts, CLASSIC_EPOCH, DISCORD_EPOCH, INSTAGRAM_EPOCH, SONYFLAKE_EPOCH,
    SONYFLAKE_V2_EPOCH, TWITTER_EPOCH,
};
pub use local::LocalGenerator;
pub use supervised::{SupervisedWorker, SupervisorCounts};
pub use ticking::{StoredTime, TickingClock};
pub use worker::{Worker, WorkerOptions, WorkerState};

#[cfg(test)]
mod test_support;
