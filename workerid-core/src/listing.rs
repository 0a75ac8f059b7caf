//! What a store answers to [`LeaseStore::list`](crate::LeaseStore::list): an
//! operator's view of one namespace.

use std::time::Duration;

use crate::{Holder, Namespace, WorkerId};

/// The state of one worker ID that has been granted at least once, judged on
/// the store's clock at the instant of the listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// Held by a lease that has not expired.
    Live {
        /// Time left until the lease ends (store clock), greater than zero.
        remaining: Duration,
    },
    /// Its last lease expired and was neither renewed, released nor granted
    /// again: the ID is free for the next acquire.
    Expired,
    /// Released (by its holder, or by [`force_release`](crate::LeaseStore::force_release)):
    /// free for the next acquire.
    Free,
}

impl LeaseState {
    /// Whether a live lease holds the ID.
    pub fn is_live(&self) -> bool {
        matches!(self, LeaseState::Live { .. })
    }

    /// `"live"`, `"expired"` or `"free"`.
    pub fn name(&self) -> &'static str {
        match self {
            LeaseState::Live { .. } => "live",
            LeaseState::Expired => "expired",
            LeaseState::Free => "free",
        }
    }

    /// The state of a lease that ends at `ends_at` (store clock), seen at
    /// `now` (same clock), when `held` says whether it is still held (not
    /// released). A helper for stores that keep an end instant.
    ///
    /// ```
    /// use std::time::Duration;
    /// use workerid_core::LeaseState;
    /// let s = |held, ends| LeaseState::judge(held, Duration::from_millis(ends), Duration::from_millis(100));
    /// assert_eq!(s(true, 150), LeaseState::Live { remaining: Duration::from_millis(50) });
    /// assert_eq!(s(true, 100), LeaseState::Expired); // a lease ends at its instant
    /// assert_eq!(s(false, 150), LeaseState::Free);
    /// ```
    pub fn judge(held: bool, ends_at: Duration, now: Duration) -> LeaseState {
        match ends_at.checked_sub(now) {
            _ if !held => LeaseState::Free,
            Some(remaining) if !remaining.is_zero() => LeaseState::Live { remaining },
            _ => LeaseState::Expired,
        }
    }
}

/// One worker ID of a [`Listing`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The worker ID.
    pub id: WorkerId,
    /// Live, expired or free.
    pub state: LeaseState,
    /// The fence of its latest grant (the next grant's is higher).
    pub fence: u64,
    /// The highest watermark its holders stored (0 if none); the next holder
    /// reads it on acquire.
    pub watermark: u64,
    /// Who its latest grant went to (for a free or expired ID: its last
    /// holder).
    pub holder: Holder,
}

/// A namespace as the store holds it.
///
/// ```
/// use workerid_core::Listing;
/// let never_used = Listing::unknown();
/// assert!(!never_used.is_known());
/// assert_eq!(never_used.live().count(), 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The `max_worker_id` the namespace was created with; `None` when the
    /// namespace was never used (no ID was ever granted in it).
    pub max_worker_id: Option<u32>,
    /// One entry per worker ID ever granted, ordered by ID. IDs never granted
    /// are not listed.
    pub leases: Vec<LeaseInfo>,
}

impl Listing {
    /// The listing of a namespace that was never used.
    pub fn unknown() -> Listing {
        Listing::default()
    }

    /// Whether the namespace was ever used.
    pub fn is_known(&self) -> bool {
        self.max_worker_id.is_some()
    }

    /// The IDs held by a live lease.
    pub fn live(&self) -> impl Iterator<Item = &LeaseInfo> {
        self.leases.iter().filter(|l| l.state.is_live())
    }

    /// The entry of `id`, if it was ever granted.
    pub fn get(&self, id: WorkerId) -> Option<&LeaseInfo> {
        self.leases
            .binary_search_by_key(&id, |l| l.id)
            .ok()
            .and_then(|i| self.leases.get(i))
    }
}

/// A namespace as [`LeaseStore::list_namespaces`](crate::LeaseStore::list_namespaces)
/// lists it: what an operator looks at first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceInfo {
    /// The namespace.
    pub namespace: Namespace,
    /// The `max_worker_id` it was created with.
    pub max_worker_id: u32,
    /// How many of its worker IDs a live lease holds now (store clock).
    pub live: u32,
}
