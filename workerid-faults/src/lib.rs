//! # workerid-faults
//!
//! A Jepsen-style safety suite for worker-ID leases and the snowflake
//! [`Worker`](workerid::snowflake::Worker) on every store.
//!
//! - [`client`]: what each client does, in a real OS process
//!   (`workerid-faults-client`) or, for the in-process memory store, on a
//!   thread of its own: join as a worker, issue snowflake IDs for a random
//!   while, then stop gracefully or die without releasing; every grant and
//!   every batch of IDs goes to a JSON-lines [`history`] first.
//! - [`nemesis`]: the controller. It starts the clients against a store
//!   ([`targets`]: a server started by `workerid-testkit`, or a SQLite file)
//!   and, from a seeded random schedule that it prints and can replay, kills
//!   clients (SIGKILL), freezes them for longer than the ttl (SIGSTOP, then
//!   SIGCONT), steps their wall clocks, kills the store server and starts it
//!   again on the same data, and kills etcd leaders and followers.
//! - [`network`]: real network faults: clients (or servers) in network
//!   namespaces of their own whose links to the store are cut, lossy,
//!   one-way, half-open or stalled ([`fault::Fault::NETWORK`]), with the
//!   time each takes to issue again after a heal and the grants no client
//!   knew of (orphans).
//! - [`checker`]: a pure function over the histories that proves, or
//!   refutes, the safety properties: no two holders of one worker ID issuing
//!   at overlapping times, no ID issued twice, no ID after its lease's local
//!   deadline or above the window reserved in the store, IDs of a worker ID
//!   rising across holders, fences rising with grants.
//! - [`inprocess`]: the same run for the memory store, whose clients share one
//!   process.
//! - [`service`]: the same discipline for the HTTP service: real
//!   `workerid-server` processes on one store, HTTP clients, a nemesis that
//!   kills, freezes and stops servers and the store, and a checker
//!   ([`service_check`]) of every ID received.
//!
//! Instants are `CLOCK_MONOTONIC` nanoseconds ([`clock::mono_ns`]): every
//! process of the machine shares that clock, so the intervals of different
//! processes compare.
#![deny(missing_docs)]

pub mod acknowledged;
mod answered;
pub mod checker;
pub mod client;
pub mod clock;
pub mod failover;
pub mod fault;
pub mod history;
pub mod http;
pub mod inprocess;
pub mod nemesis;
pub mod network;
pub mod outcome;
pub mod peers;
pub mod recovery;
pub mod run_end;
pub mod service;
pub mod service_check;
mod service_clients;
mod service_fleet;
pub mod targets;
pub mod timeline;

use std::path::PathBuf;

/// What can go wrong when running the suite (not a safety violation: those
/// are in the checker's [`Report`](checker::Report)).
#[derive(Debug, thiserror::Error)]
pub enum FaultsError {
    /// A history or log file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A history line that is not a history event (not the last line, which
    /// may be cut short by a kill).
    #[error("{path} line {line}: not a history event: {source}")]
    BadHistory {
        /// The file.
        path: PathBuf,
        /// Its line number (from 1).
        line: usize,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The store could not be opened.
    #[error("cannot open the store: {0}")]
    Open(String),
    /// The store or the worker refused in a way the client cannot go on from.
    #[error(transparent)]
    Store(#[from] workerid::Error),
    /// The snowflake worker refused in a way the client cannot go on from.
    #[error(transparent)]
    Snowflake(#[from] workerid::snowflake::Error),
    /// A client process could not be started.
    #[error("cannot start client {name}: {source}")]
    Spawn {
        /// The client's name.
        name: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A bad setting of a run.
    #[error("bad configuration: {0}")]
    Config(String),
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, FaultsError>;

pub(crate) fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> FaultsError {
    let path = path.into();
    move |source| FaultsError::Io { path, source }
}
