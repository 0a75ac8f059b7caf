//! # workerid
//!
//! Unique IDs for distributed systems: a process leases a small worker ID
//! from a shared store, and makes snowflake IDs on it; or it takes ranges of
//! a counter from the store (segment IDs). This facade is the one crate to
//! depend on: it re-exports [`workerid_core`] (the lease contract,
//! [`Allocator`], [`snowflake`], [`segment`]) and each store behind a
//! feature, and opens any store from its URL with [`open`].
//!
//! | feature | store | URL |
//! | --- | --- | --- |
//! | `memory` (default) | [`memory`] | `memory://` |
//! | `redis` | [`redis`] | `redis://`, `rediss://`, `redis+cluster://`, `redis+sentinel://` |
//! | `etcd` | [`etcd`] | `etcd://`, `etcds://` |
//! | `postgres`, `mysql`, `sqlite` | [`sql`] | `postgres://`, `mysql://`, `mariadb://`, `sqlite://` |
//! | `all` | every one | |
//!
//! `snowflake` and `segment` (both on by default) re-export those modules;
//! every store keeps segment counters whichever features are on.
//!
//! `tls-rustls` (on by default) compiles TLS into the stores that are
//! compiled in (rustls with the ring provider; no system library needed).
//! The Redis driver builds its TLS configuration from rustls's process-wide
//! provider: the first `rediss://` store installs ring as that default when
//! none is installed, so a binary that wants another provider installs it
//! before it opens the store. The `etcd` feature needs `protoc` to build.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use workerid::{Allocator, LeaseOptions};
//!
//! let store = workerid::open("memory://").await?; // or "redis://...", "postgres://..."
//! let allocator = Allocator::new(store, "mycluster", LeaseOptions::new().worker_bits(8))?;
//! let mut lease = allocator.acquire().await?;
//! allocator.renew(&mut lease).await?;
//! allocator.release(&lease).await?;
//! # Ok(()) }
//! ```
//!
//! Each part has an error of its own, `#[non_exhaustive]`, with
//! `is_retryable` where a retry can help: [`OpenError`] (opening a store),
//! [`Error`] (the lease contract), `snowflake::Error` (which holds a lease
//! error as `Lease`), `segment::Error`. They implement `std::error::Error`,
//! so a function that opens a store and joins a worker returns
//! `Box<dyn std::error::Error + Send + Sync>` (or an `anyhow::Error`).
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod any_store;
#[cfg(doctest)]
mod doctests;
mod kind;
mod open;
mod open_error;
// URL helpers for the network stores; a build without some uses fewer of them.
#[cfg_attr(not(all(feature = "redis", feature = "etcd")), allow(dead_code))]
mod store_url;

pub use any_store::AnyStore;
pub use kind::StoreKind;
pub use open::{open, FailureCause, OpenOptions};
pub use open_error::OpenError;
pub use workerid_core::*;

/// Snowflake IDs on a leased worker ID ([`workerid_snowflake`]).
#[cfg(feature = "snowflake")]
pub use workerid_snowflake as snowflake;

/// Segment IDs ([`workerid_segment`]).
#[cfg(feature = "segment")]
pub use workerid_segment as segment;

/// The in-process store ([`workerid_memory`]).
#[cfg(feature = "memory")]
pub use workerid_memory as memory;

/// The Redis store ([`workerid_redis`]).
#[cfg(feature = "redis")]
pub use workerid_redis as redis;

/// The etcd store ([`workerid_etcd`]).
#[cfg(feature = "etcd")]
pub use workerid_etcd as etcd;

/// The SQL store ([`workerid_sql`]): PostgreSQL, MySQL, MariaDB, SQLite.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use workerid_sql as sql;
