//! One namespace's worker IDs, with O(log n) acquire.

use std::collections::{BTreeSet, VecDeque};
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
/// pre-filling). Every other ID is either held, in `held` ordered by its
/// expiry, or released, in `released` in the order of release (nearly the
/// order of release time: two releases may read the clock in one order and
/// queue in the other, which only changes which free ID is reused first).
/// Acquire takes whichever of the two heads has been free longer: O(log n),
/// and on a nearly full pool it touches only the ends of `held`, which stay
/// in cache, where one ordered set of every ID made it walk a 2^16-entry tree
/// twice per grant.
#[derive(Debug)]
pub(crate) struct Pool {
    pub(crate) max_worker_id: u32,
    next_unused: u64,
    /// Indexed by ID: IDs are granted first in order (`0..next_unused`), so
    /// the slots are dense.
    slots: Vec<Slot>,
    held: BTreeSet<(Duration, u32)>,
    released: VecDeque<(Duration, u32)>,
}

impl Pool {
    pub(crate) fn new(max_worker_id: u32) -> Self {
        Pool {
            max_worker_id,
            next_unused: 0,
            slots: Vec::new(),
            held: BTreeSet::new(),
            released: VecDeque::new(),
        }
    }

    pub(crate) fn acquire(&mut self, now: Duration, token: &Token, ttl: Duration) -> Result<Grant> {
        let expired = self.held.first().copied().filter(|&(end, _)| end <= now);
        let id = match (self.released.front().copied(), expired) {
            (Some(released), Some(expired)) if expired.0 < released.0 => {
                self.held.remove(&expired);
                expired.1
            }
            (Some((_, id)), _) => {
                self.released.pop_front();
                id
            }
            (None, Some(expired)) => {
                self.held.remove(&expired);
                expired.1
            }
            _ if self.next_unused <= u64::from(self.max_worker_id) => {
                let id = self.next_unused as u32;
                self.next_unused += 1;
                self.slots.push(Slot {
                    holder: None,
                    expires_at: now,
                    fence: 0,
                    watermark: 0,
                });
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
            .get_mut(id as usize)
            .ok_or_else(|| Error::unavailable("memory", "internal state lost a slot"))?;
        slot.holder = Some(*token);
        slot.expires_at = now + ttl;
        slot.fence += 1;
        self.held.insert((slot.expires_at, id));
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
        let slot = match self.slots.get_mut(id.get() as usize) {
            Some(slot) => slot,
            None => return Err(Error::NotAssigned { id }),
        };
        match slot.holder {
            None => return Err(Error::NotAssigned { id }),
            Some(holder) if holder != *token => return Err(Error::TokenMismatch { id }),
            Some(_) if now >= slot.expires_at => return Err(Error::TokenExpired { id }),
            Some(_) => {}
        }
        self.held.remove(&(slot.expires_at, id.get()));
        slot.expires_at = free_at;
        slot.watermark = slot.watermark.max(watermark);
        if release {
            slot.holder = None;
            self.released.push_back((free_at, id.get()));
        } else {
            self.held.insert((free_at, id.get()));
        }
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
        (0u32..)
            .zip(&self.slots)
            .map(|(id, slot)| LeaseInfo {
                id: WorkerId::from(id),
                state: LeaseState::judge(slot.holder.is_some(), slot.expires_at, now),
                fence: slot.fence,
                watermark: slot.watermark,
            })
            .collect()
    }

    /// Frees `id` if a live lease holds it, keeping fence and watermark.
    pub(crate) fn force_release(&mut self, now: Duration, id: WorkerId) -> bool {
        let Some(slot) = self.slots.get_mut(id.get() as usize) else {
            return false;
        };
        if slot.holder.is_none() || slot.expires_at <= now {
            return false;
        }
        self.held.remove(&(slot.expires_at, id.get()));
        slot.holder = None;
        slot.expires_at = now;
        self.released.push_back((now, id.get()));
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
