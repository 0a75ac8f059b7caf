//! # workerid
//!
//! Unique IDs for distributed systems. This facade re-exports
//! [`workerid_core`] (the lease contract, [`Allocator`], the types) and the
//! built-in stores behind features (`memory`, on by default).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> workerid::Result<()> {
//! use workerid::{memory::MemoryStore, Allocator, LeaseOptions};
//!
//! let allocator = Allocator::new(MemoryStore::new(), "mycluster", LeaseOptions::new().worker_bits(8))?;
//! let (id, token) = allocator.get_id().await?;
//! allocator.renew_id(u64::from(id), &token).await?;
//! allocator.release_id(u64::from(id), &token).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub use workerid_core::*;

/// The in-process store ([`workerid_memory`]).
#[cfg(feature = "memory")]
pub use workerid_memory as memory;
