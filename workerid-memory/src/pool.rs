//! One namespace's worker IDs, with O(log n) acquire.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use workerid_core::{Error, Grant, LeaseInfo, LeaseState, Result, Token, WorkerId};

/// The state of one worker ID that has been granted at least once.
#[derive(Debug)]
struct Slot {
    /// `None` once released.
    holder: Option<Token>,
    /// When the current (or last) lease ends, on the store's clock.
    expires_at: Duration,
    fence: u64,
    watermark: u64,
}

/// One namespace.
///
/// IDs that were never granted are `next_unused..=max_worker_id` (no
/// pre-filling); every other ID sits in `by_free_at`, ordered by the instant it
/// is (or became) free: its expiry while held, its release time once released.
/// Acquire looks at the first entry only, so it is O(log n).
#[derive(Debug)]
pub(crate) struct Pool {
    pub(crate) max_worker_id: u32,
    next_unused: u64,
    slots: HashMap<u32, Slot>,
    by_free_at: BTreeSet<(Duration, u32)>,
}

impl Pool {
    pub(crate) fn new(max_worker_id: u32) -> Self {
        Pool {
            max_worker_id,
            next_unused: 0,
            slots: HashMap::new(),
            by_free_at: BTreeSet::new(),
        }
    }

    pub(crate) fn acquire(&mut self, now: Duration, token: &Token, ttl: Duration) -> Result<Grant> {
        let id = match self.by_free_at.first() {
            Some(&(free_at, id)) if free_at <= now => {
                self.by_free_at.remove(&(free_at, id));
                id
            }
            _ if self.next_unused <= u64::from(self.max_worker_id) => {
                let id = self.next_unused as u32;
                self.next_unused += 1;
                self.slots.insert(
                    id,
                    Slot {
                        holder: None,
                        expires_at: now,
                        fence: 0,
                        watermark: 0,
                    },
                );
                id
            }
            _ => {
                return Err(Error::NoAvailableId {
                    max_worker_id: self.max_worker_id,
                })
            }
        };
        let slot = self
            .slots
            .get_mut(&id)
            .ok_or_else(|| Error::unavailable("memory", "internal state lost a slot"))?;
        slot.holder = Some(*token);
        slot.expires_at = now + ttl;
        slot.fence += 1;
        self.by_free_at.insert((slot.expires_at, id));
        Ok(Grant {
            id: WorkerId::from(id),
            fence: slot.fence,
            previous_watermark: slot.watermark,
        })
    }

    /// Checks that `token` holds `id` live, then applies `change` to its slot
    /// and the instant it will be free again.
    fn update_held(
        &mut self,
        now: Duration,
        id: WorkerId,
        token: &Token,
        watermark: u64,
        free_at: Duration,
        release: bool,
    ) -> Result<()> {
        let slot = match self.slots.get_mut(&id.get()) {
            Some(slot) => slot,
            None => return Err(Error::NotAssigned { id }),
        };
        match slot.holder {
            None => return Err(Error::NotAssigned { id }),
            Some(holder) if holder != *token => return Err(Error::TokenMismatch { id }),
            Some(_) if now >= slot.expires_at => return Err(Error::TokenExpired { id }),
            Some(_) => {}
        }
        self.by_free_at.remove(&(slot.expires_at, id.get()));
        slot.expires_at = free_at;
        slot.watermark = slot.watermark.max(watermark);
        if release {
            slot.holder = None;
        }
        self.by_free_at.insert((free_at, id.get()));
        Ok(())
    }

    pub(crate) fn renew(
        &mut self,
        now: Duration,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        self.update_held(now, id, token, watermark, now + ttl, false)
    }

    /// Every ID granted at least once, ordered by ID.
    pub(crate) fn list(&self, now: Duration) -> Vec<LeaseInfo> {
        let mut leases: Vec<LeaseInfo> = self
            .slots
            .iter()
            .map(|(&id, slot)| LeaseInfo {
                id: WorkerId::from(id),
                state: LeaseState::judge(slot.holder.is_some(), slot.expires_at, now),
                fence: slot.fence,
                watermark: slot.watermark,
            })
            .collect();
        leases.sort_unstable_by_key(|l| l.id);
        leases
    }

    /// Frees `id` if a live lease holds it, keeping fence and watermark.
    pub(crate) fn force_release(&mut self, now: Duration, id: WorkerId) -> bool {
        let Some(slot) = self.slots.get_mut(&id.get()) else {
            return false;
        };
        if slot.holder.is_none() || slot.expires_at <= now {
            return false;
        }
        self.by_free_at.remove(&(slot.expires_at, id.get()));
        slot.holder = None;
        slot.expires_at = now;
        self.by_free_at.insert((now, id.get()));
        true
    }

    pub(crate) fn release(
        &mut self,
        now: Duration,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        self.update_held(now, id, token, watermark, now, true)
    }
}
