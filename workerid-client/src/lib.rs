//! A store that is a running `workerid-server`, reached over its gRPC API:
//! [`ServerStore`] implements [`LeaseStore`](workerid_core::LeaseStore) and
//! [`SegmentStore`](workerid_segment::SegmentStore), so an application
//! keeps its code (`Allocator`, `snowflake::Worker`, `SegmentAllocator`) and
//! its speed (IDs from buffers in its own process), while only the servers
//! talk to the database.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use workerid_client::ServerStore;
//! use workerid_core::{Allocator, LeaseOptions};
//!
//! let store = ServerStore::builder("http://ids.internal:8881")
//!     .bearer_token("s3cret")
//!     .connect()
//!     .await?;
//! let allocator = Allocator::new(store, "orders", LeaseOptions::new().worker_bits(8))?;
//! let lease = allocator.acquire().await?;
//! # let _ = lease; Ok(()) }
//! ```
//!
//! The server checks every input and answers with the store's own contract;
//! its refusals come back as the same typed errors a store in the process
//! would give. A server that cannot be reached, is restarting, or answers
//! too late gives [`Unavailable`](workerid_core::Error::Unavailable),
//! never a success it did not confirm.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod errors;
mod leases;
mod pages;
mod segments;
mod store;

pub use store::{ConnectError, ServerStore, ServerStoreBuilder};

/// The Rust block of `docs/server.md`, compiled as a doctest of this crate
/// (the facade, which compiles the other pages', does not depend on it).
#[cfg(doctest)]
#[doc = include_str!("../../docs/server.md")]
pub struct ServerDocs;
