//! libx.net/workerid's calls, for code ported from Go: a worker ID and a
//! token string instead of a [`Lease`](crate::Lease) handle.
//!
//! ```
//! use workerid_core::compat::LibxCompat;
//! use workerid_core::{Allocator, LeaseOptions, LeaseStore};
//!
//! async fn demo(store: impl LeaseStore) -> workerid_core::Result<()> {
//!     let allocator = Allocator::new(store, "orders", LeaseOptions::new().worker_bits(4))?;
//!     let (id, token) = allocator.get_id().await?;
//!     allocator.renew_id(u64::from(id), &token).await?;
//!     allocator.release_id(u64::from(id), &token).await?;
//!     Ok(())
//! }
//! ```

use std::future::Future;

use crate::{Allocator, Result};

/// `GetID`, `Renew` and `Release` as libx.net/workerid names them, on an
/// [`Allocator`]. The semantics are the allocator's own; a renewal keeps
/// the watermark as it is.
pub trait LibxCompat {
    /// `GetID`: leases a worker ID and returns it with its token text.
    ///
    /// # Errors
    /// As [`Allocator::acquire`].
    fn get_id(&self) -> impl Future<Output = Result<(u32, String)>> + Send;

    /// `Renew(workerID, token)`, with the default ttl.
    ///
    /// # Errors
    /// [`Error::InvalidWorkerId`](crate::Error::InvalidWorkerId) and
    /// [`Error::InvalidToken`](crate::Error::InvalidToken) before any I/O;
    /// otherwise as [`Allocator::renew`].
    fn renew_id(&self, id: u64, token: &str) -> impl Future<Output = Result<()>> + Send;

    /// `Release(workerID, token)`.
    ///
    /// # Errors
    /// As [`LibxCompat::renew_id`].
    fn release_id(&self, id: u64, token: &str) -> impl Future<Output = Result<()>> + Send;
}

impl LibxCompat for Allocator {
    async fn get_id(&self) -> Result<(u32, String)> {
        let lease = self.acquire().await?;
        Ok((lease.id().get(), lease.token().to_string()))
    }

    async fn renew_id(&self, id: u64, token: &str) -> Result<()> {
        self.renew_by_text(id, token).await
    }

    async fn release_id(&self, id: u64, token: &str) -> Result<()> {
        self.release_by_text(id, token).await
    }
}
