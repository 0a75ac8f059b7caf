//! # workerid-core
//!
//! The worker-ID lease contract: a process asks a [`LeaseStore`] for a small
//! integer (its worker ID, `0..=max_worker_id`) and a 22-character random
//! [`Token`]; it renews the lease while it lives and releases it on exit; an
//! expired ID can be taken by someone else.
//!
//! - [`LeaseStore`]: the trait a backend implements, with its contract.
//! - [`Allocator`]: what users call (`acquire` / `renew` / `release`; the
//!   calls of libx.net/workerid, `get_id` / `renew_id` / `release_id`, are
//!   in [`compat`]), checking every input before any I/O.
//! - [`Lease`], [`Token`], [`Holder`], [`Namespace`], [`WorkerId`], [`LeaseOptions`],
//!   [`Capabilities`], [`Error`].
//! - [`Listing`], [`LeaseInfo`], [`LeaseState`]: an operator's view of a
//!   namespace ([`LeaseStore::list`], optional, as is
//!   [`LeaseStore::force_release`]).
//!
//! Snowflake IDs on a leased worker ID are in `workerid-snowflake`, segment
//! IDs in `workerid-segment`; the backends live in their own crates
//! (`workerid-memory`, ...); the `workerid-conformance` crate checks that a
//! store keeps the contract.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod allocator;
pub mod compat;
mod error;
mod holder;
mod lease;
mod listing;
mod namespace;
pub mod observe;
mod options;
mod redact;
mod store;
mod text;
mod token;
mod worker_id;

pub use allocator::Allocator;
pub use error::{BoxError, Error, Result};
pub use holder::{Holder, HOLDER_ENV, MAX_HOLDER_LEN};
pub use lease::Lease;
pub use listing::{LeaseInfo, LeaseState, Listing, NamespaceInfo};
pub use namespace::{Namespace, MAX_NAMESPACE_LEN};
pub use options::{
    LeaseOptions, DEFAULT_DRIFT_ALLOWANCE_PPM, DEFAULT_MAX_LEASE_TIME, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_WORKER_BITS, MAX_LEASE_TIME_LIMIT,
};
pub use redact::redact_url;
pub use store::{Capabilities, Grant, LeaseStore};
pub use token::{Token, TOKEN_LEN};
pub use worker_id::{WorkerId, MAX_WORKER_BITS, MAX_WORKER_ID_LIMIT};
