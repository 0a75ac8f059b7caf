//! # workerid-sql
//!
//! [`SqlStore`]: a [`LeaseStore`](workerid_core::LeaseStore) on PostgreSQL, MySQL/MariaDB or SQLite,
//! through sqlx. Expiry is judged on the database's clock (for SQLite, an
//! embedded database, the local clock); everything is durable.
//!
//! - **acquire** is one short transaction: create-or-lock the namespace row
//!   (so acquirers of one namespace take turns; renewals are not blocked),
//!   take the ID that has been free longest through the index
//!   `(namespace, expires_at)` (O(log n)), or else the next never-used ID.
//! - **renew** and **release** are one guarded `UPDATE` each (`... WHERE token
//!   = ? AND expires_at > now`); only when it matches nothing does a second
//!   query find out why, to answer `TokenExpired`, `TokenMismatch` or
//!   `NotAssigned`. On a SQLite file the renewals and releases in flight on one
//!   store handle share a write transaction (group commit: one WAL sync
//!   for all of them), each answered only once it is committed.
//!
//! ```no_run
//! # async fn demo() -> workerid_core::Result<()> {
//! use workerid_core::{Allocator, LeaseOptions};
//! use workerid_sql::SqlStore;
//!
//! // Creates the tables if needed (safe from many processes at once).
//! let store = SqlStore::connect("sqlite:///var/lib/myapp/workerid.db?mode=rwc").await?;
//! let allocator = Allocator::new(store, "mycluster", LeaseOptions::new())?;
//! let lease = allocator.acquire().await?;
//! # Ok(()) }
//! ```
//!
//! The schema (PostgreSQL; MySQL uses `ascii_bin` text so that names and
//! tokens compare case-sensitively):
//!
//! ```sql
//! CREATE TABLE workerid_leases_namespaces (
//!     namespace VARCHAR(128) NOT NULL PRIMARY KEY,
//!     max_worker_id BIGINT NOT NULL,   -- the pool size the namespace was created with
//!     next_id BIGINT NOT NULL);        -- IDs never granted are next_id..=max_worker_id
//! CREATE TABLE workerid_leases (
//!     namespace VARCHAR(128) NOT NULL,
//!     worker_id BIGINT NOT NULL,
//!     token VARCHAR(22) NULL,          -- NULL once released
//!     expires_at BIGINT NOT NULL,      -- microseconds, database clock; release time once released
//!     fence BIGINT NOT NULL,
//!     watermark BIGINT NOT NULL,       -- the u64 with its top bit flipped (order-preserving)
//!     PRIMARY KEY (namespace, worker_id));
//! CREATE INDEX workerid_leases_free ON workerid_leases (namespace, expires_at);
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod acquire_routine;
mod builder;
mod committed;
mod dialect;
mod group_commit;
mod listing;
mod schema;
mod segments;
mod socket;
mod store;

pub use builder::SqlStoreBuilder;
pub use dialect::Dialect;
pub use store::{SqlStore, DEFAULT_SEGMENTS_TABLE, DEFAULT_TABLE};
