//! Worker IDs.

use std::fmt;

use crate::{Error, Result};

/// The largest `worker_bits` the contract allows.
pub const MAX_WORKER_BITS: u8 = 22;

/// The largest `max_worker_id` the contract allows (2^22 - 1).
pub const MAX_WORKER_ID_LIMIT: u32 = (1 << MAX_WORKER_BITS) - 1;

/// A worker ID: a small integer in `0..=max_worker_id` of its pool.
///
/// ```
/// use workerid_core::WorkerId;
/// let id = WorkerId::checked(5, 7).unwrap();
/// assert_eq!(id.get(), 5);
/// assert!(WorkerId::checked(8, 7).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct WorkerId(u32);

impl WorkerId {
    /// A worker ID, checked against the pool's `max_worker_id`.
    ///
    /// # Errors
    /// [`Error::InvalidWorkerId`] when `id > max_worker_id`.
    pub fn checked(id: u64, max_worker_id: u32) -> Result<Self> {
        if id > u64::from(max_worker_id) {
            return Err(Error::InvalidWorkerId { id, max_worker_id });
        }
        Ok(WorkerId(id as u32))
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl From<u32> for WorkerId {
    fn from(id: u32) -> Self {
        WorkerId(id)
    }
}

impl From<WorkerId> for u32 {
    fn from(id: WorkerId) -> Self {
        id.0
    }
}

impl From<WorkerId> for u64 {
    fn from(id: WorkerId) -> Self {
        u64::from(id.0)
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
