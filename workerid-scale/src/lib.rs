//! # workerid-scale
//!
//! The scale benchmark: N live snowflake workers at once (tokio tasks, each
//! a real [`Worker`](workerid::snowflake::Worker) with its own keeper
//! task and lease) on one real store started by the harness, all sharing one
//! store handle. It measures the renewals per second the store sustains, the
//! store's CPU and memory, the renew latency (the store-call metrics the
//! libraries record, kept by a recorder of the tool's own: [`recorded`]), the client's memory per
//! idle worker, the disk syncs the store counts, and counts lapses (workers whose lease was lost); then churn:
//! a share of the workers stop and join again every few seconds, with the
//! same checks. A ramp of worker counts finds the largest count a store holds.
//!
//! ```sh
//! cargo run -p workerid-scale --release -- --store redis --workers 10000 --ttl 10 --seconds 60
//! cargo run -p workerid-scale --release -- --store all            # the README's sizing table
//! cargo run -p workerid-scale --release -- --quick                # about a minute
//! ```
//!
//! It is a benchmark, never a timed test: numbers depend on the machine.
#![deny(missing_docs)]

pub mod fleet;
pub mod histogram;
pub mod plot;
pub mod procfs;
pub mod recorded;
pub mod report;
pub mod run;
pub mod stores;
pub mod syncs;

pub use fleet::{Fleet, FleetConfig};
pub use run::{ramp, Settings, Step, Window};
pub use stores::{Connect, StoreKind, Target};

/// What can go wrong in a scale run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting that cannot work (bits, ttl, an unknown store).
    #[error("bad setting: {0}")]
    Config(String),
    /// The store refused or could not answer.
    #[error("store: {0}")]
    Store(#[from] workerid::Error),
    /// The store could not be opened.
    #[error("store: {0}")]
    Open(#[from] workerid::OpenError),
    /// The harness could not start a server.
    #[error("server: {0}")]
    Server(String),
    /// A temporary file or directory.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}
