//! # workerid-cli
//!
//! The library half of the `workerid` ops binary: opening a store from a URL
//! ([`open`]) and the errors and exit codes the binary answers with
//! ([`error`]). The commands themselves live in the binary.
//!
//! ```no_run
//! # async fn demo() -> Result<(), workerid_cli::error::CliError> {
//! let store = workerid_cli::open::store_from_url("redis://127.0.0.1:6379/").await?;
//! let caps = store.capabilities();
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod error;
pub mod open;
