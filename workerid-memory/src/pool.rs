//! One namespace's worker IDs, with O(log n) acquire.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

use workerid_core::{Error, Grant, Holder, LeaseInfo, LeaseState, Result, Token, WorkerId};

/// The state of one worker ID that has been granted at least once.
#[derive(Debug)]
struct Slot {
    /// The token of the current (or last) lease; `None` once released.
    token: Option<Token>,
    /// Who the latest grant went to.
    holder: Holder,
    /// When the current (or last) lease ends, on the store's clock.
    expires_at: Duration,
    fence: u64,
    watermark: u64,
}

/// A released ID in the queue of free IDs, with what its slot held when it
/// was released (a free slot never changes until it is granted again).
#[derive(Debug, Clone, Copy)]
struct Released {
    free_at: Duration,
    id: u32,
    fence: u64,
    watermark: u64,
}

impl Released {
    /// `id`, free from `free_at`, whose slot is `slot`.
    fn new(free_at: Duration, id: WorkerId, slot: &Slot) -> Self {
        Released {
            free_at,
            id: id.get(),
            fence: slot.fence,
            watermark: slot.watermark,
        }
    }
}

/// One namespace.
///
/// IDs that were never granted are `next_unused..=max_worker_id` (no
/// pre-filling). Every other ID is either held, in `held` by its lease's end,
/// or released, in `released` in the order of release (nearly the order of
/// release time: two releases may read the clock in one order and queue in
/// the other, which only changes which free ID is reused first). Acquire
/// takes whichever of the two heads has been free longer.
///
/// `held` is a min-heap whose entries are never removed in place: a renewal
/// or grant pushes the lease's new end (at the bottom, usually without a
/// single swap, since it is the latest), and an entry that no longer matches
/// its slot (renewed, released or granted again since) is dropped when it
/// reaches the top, or when the heap, grown past twice the slots, is rebuilt
/// from them (O(n), after at least n pushes). So acquire and release on a
/// nearly full pool cost the same as on an empty one: no search of a
/// 2^16-entry tree per operation, as an ordered set needs.
#[derive(Debug)]
pub(crate) struct Pool {
    pub(crate) max_worker_id: u32,
    next_unused: u64,
    /// Indexed by ID: IDs are granted first in order (`0..next_unused`), so
    /// the slots are dense.
    slots: Vec<Slot>,
    held: BinaryHeap<Reverse<(Duration, u32)>>,
    released: VecDeque<Released>,
    /// The ID each token holds (live, or expired and not granted again), so
    /// an acquire sent again after its answer was lost finds its own lease.
    owners: HashMap<Token, u32>,
}

impl Pool {
    pub(crate) fn new(max_worker_id: u32) -> Self {
        Pool {
            max_worker_id,
            next_unused: 0,
            slots: Vec::new(),
            held: BinaryHeap::new(),
            released: VecDeque::new(),
            owners: HashMap::new(),
        }
    }

    /// The held lease that ends first, after dropping the stale entries
    /// above it.
    fn first_held(&mut self) -> Option<(Duration, u32)> {
        while let Some(&Reverse((end, id))) = self.held.peek() {
            let current = self
                .slots
                .get(id as usize)
                .is_some_and(|slot| slot.token.is_some() && slot.expires_at == end);
            if current {
                return Some((end, id));
            }
            self.held.pop();
        }
        None
    }

    /// Records that `id`'s lease now ends at `end` (an earlier entry of it
    /// goes stale), rebuilding the heap from the slots when stale entries
    /// outnumber the slots.
    fn push_held(&mut self, end: Duration, id: u32) {
        self.held.push(Reverse((end, id)));
        if self.held.len() > 2 * self.slots.len() + 64 {
            self.held = (0u32..)
                .zip(&self.slots)
                .filter(|(_, slot)| slot.token.is_some())
                .map(|(id, slot)| Reverse((slot.expires_at, id)))
                .collect();
        }
    }

    pub(crate) fn acquire(
        &mut self,
        now: Duration,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        if let Some(grant) = self.acquired_before(now, token, ttl) {
            return Ok(grant);
        }
        let expired = self.first_held().filter(|&(end, _)| end <= now);
        // The fence and watermark a released ID had, from its queue entry
        // rather than its slot: on a nearly full pool the ID free longest was
        // last touched long ago, and acquire then only writes to its slot (no
        // read that misses the cache). Other IDs' slots are read: an expired
        // lease's was just checked by `first_held`, a new ID's just pushed.
        let (id, before) = match (self.released.front().copied(), expired) {
            // Whichever was free first: the expired lease or the released ID.
            (released, Some((end, id))) if released.is_none_or(|r| end < r.free_at) => {
                self.held.pop();
                (id, None)
            }
            (Some(released), _) => {
                self.released.pop_front();
                (released.id, Some((released.fence, released.watermark)))
            }
            _ if self.next_unused <= u64::from(self.max_worker_id) => {
                let id = self.next_unused as u32;
                self.next_unused += 1;
                self.slots.push(Slot {
                    token: None,
                    holder: holder.clone(),
                    expires_at: now,
                    fence: 0,
                    watermark: 0,
                });
                (id, None)
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
        let (fence, watermark) = before.unwrap_or((slot.fence, slot.watermark));
        // The previous holder's token may hold another ID by now (its
        // acquire sent again after this one expired): its entry is kept.
        if let Some(previous) = slot.token.filter(|t| self.owners.get(t) == Some(&id)) {
            self.owners.remove(&previous);
        }
        self.owners.insert(*token, id);
        *slot = Slot {
            token: Some(*token),
            holder: holder.clone(),
            expires_at: now.saturating_add(ttl),
            fence: fence + 1,
            watermark,
        };
        let grant = Grant {
            id: WorkerId::from(id),
            fence: fence + 1,
            previous_watermark: watermark,
        };
        let end = slot.expires_at;
        self.push_held(end, id);
        Ok(grant)
    }

    /// The lease `token` already holds live, extended to `now + ttl`: the
    /// answer to an acquire sent again.
    fn acquired_before(&mut self, now: Duration, token: &Token, ttl: Duration) -> Option<Grant> {
        let id = *self.owners.get(token)?;
        let slot = self.slots.get_mut(id as usize)?;
        if slot.token != Some(*token) || slot.expires_at <= now {
            return None;
        }
        slot.expires_at = now.saturating_add(ttl);
        let grant = Grant {
            id: WorkerId::from(id),
            fence: slot.fence,
            previous_watermark: slot.watermark,
        };
        self.push_held(now.saturating_add(ttl), id);
        Some(grant)
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
        match slot.token {
            None => return Err(Error::NotAssigned { id }),
            Some(held) if held != *token => return Err(Error::TokenMismatch { id }),
            Some(_) if now >= slot.expires_at => return Err(Error::TokenExpired { id }),
            Some(_) => {}
        }
        slot.expires_at = free_at;
        // A release's watermark is its holder's final word; a renewal's
        // only raises it.
        slot.watermark = if release && watermark != 0 {
            watermark
        } else {
            slot.watermark.max(watermark)
        };
        if release {
            slot.token = None;
            self.owners.remove(token);
            self.released.push_back(Released::new(free_at, id, slot));
        } else {
            self.push_held(free_at, id.get());
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
        self.update_held(now, id, token, watermark, now.saturating_add(ttl), false)
    }

    /// Every ID granted at least once, ordered by ID.
    pub(crate) fn list(&self, now: Duration) -> Vec<LeaseInfo> {
        (0u32..)
            .zip(&self.slots)
            .map(|(id, slot)| LeaseInfo {
                id: WorkerId::from(id),
                state: LeaseState::judge(slot.token.is_some(), slot.expires_at, now),
                fence: slot.fence,
                watermark: slot.watermark,
                holder: slot.holder.clone(),
            })
            .collect()
    }

    /// How many IDs a live lease holds at `now`.
    pub(crate) fn live(&self, now: Duration) -> u32 {
        let live = self
            .slots
            .iter()
            .filter(|slot| slot.token.is_some() && slot.expires_at > now)
            .count();
        u32::try_from(live).unwrap_or(u32::MAX)
    }

    /// Frees `id` if a live lease holds it, keeping fence and watermark.
    pub(crate) fn force_release(&mut self, now: Duration, id: WorkerId) -> bool {
        let Some(slot) = self.slots.get_mut(id.get() as usize) else {
            return false;
        };
        if slot.token.is_none() || slot.expires_at <= now {
            return false;
        }
        if let Some(token) = slot.token.take() {
            self.owners.remove(&token);
        }
        slot.expires_at = now;
        self.released.push_back(Released::new(now, id, slot));
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

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn token() -> Token {
        Token::generate()
    }

    fn holder() -> Holder {
        Holder::new("test:1").unwrap()
    }

    #[test]
    fn renewals_leave_a_bounded_heap_and_expiry_is_still_found_in_order() {
        let mut pool = Pool::new(99);
        let tokens: Vec<Token> = (0..100).map(|_| token()).collect();
        for (i, t) in tokens.iter().enumerate() {
            let grant = pool
                .acquire(SEC * i as u32, t, 1000 * SEC, &holder())
                .unwrap();
            assert_eq!(grant.id.get(), i as u32);
        }
        // Ten thousand renewals: each pushes an entry; the heap is rebuilt
        // whenever stale entries pile up past twice the slots.
        for round in 0..100u32 {
            for (i, t) in tokens.iter().enumerate() {
                let now = SEC * (100 + round);
                // ID i ends at now + 10 s + i ms: the lower IDs end first.
                let ttl = 10 * SEC + Duration::from_millis(i as u64);
                pool.renew(now, WorkerId::from(i as u32), t, ttl, 0)
                    .unwrap();
            }
            assert!(pool.held.len() <= 2 * pool.slots.len() + 65);
        }
        let now = SEC * 199;
        assert!(matches!(
            pool.acquire(now, &token(), SEC, &holder()),
            Err(Error::NoAvailableId { .. })
        ));
        // Past every end: reclaimed earliest end first.
        let later = now + 20 * SEC;
        for expected in 0..100 {
            let grant = pool.acquire(later, &token(), SEC, &holder()).unwrap();
            assert_eq!(grant.id.get(), expected);
            assert_eq!(grant.fence, 2);
        }
    }

    #[test]
    fn the_id_free_longest_goes_first_whether_expired_or_released() {
        let mut pool = Pool::new(1);
        let (a, b) = (token(), token());
        pool.acquire(Duration::ZERO, &a, 10 * SEC, &holder())
            .unwrap(); // ID 0, ends at 10 s
        pool.acquire(Duration::ZERO, &b, 100 * SEC, &holder())
            .unwrap(); // ID 1, ends at 100 s
        pool.release(15 * SEC, WorkerId::from(1), &b, 0).unwrap();
        // At 20 s: ID 0 has been free since 10 s, ID 1 since 15 s.
        let first = pool.acquire(20 * SEC, &token(), SEC, &holder()).unwrap();
        assert_eq!(first.id.get(), 0, "the expired lease ended first");
        let second = pool.acquire(20 * SEC, &token(), SEC, &holder()).unwrap();
        assert_eq!(second.id.get(), 1);
    }

    #[test]
    fn a_token_that_moved_to_another_id_keeps_it_when_its_old_one_is_granted() {
        let mut pool = Pool::new(1);
        let (t, filler, z) = (token(), token(), token());
        let old = pool
            .acquire(Duration::ZERO, &t, 10 * SEC, &holder())
            .unwrap();
        pool.acquire(Duration::ZERO, &filler, 5 * SEC, &holder())
            .unwrap();
        // At 20 s: t's lease has expired; sent again, its acquire gets the
        // ID free longest (1, since 5 s), and its old ID still names it.
        let moved = pool.acquire(20 * SEC, &t, 10 * SEC, &holder()).unwrap();
        assert_ne!(moved.id, old.id);
        let taken = pool.acquire(20 * SEC, &z, 10 * SEC, &holder()).unwrap();
        assert_eq!(taken.id, old.id);
        // Sent again once more, t's acquire still answers its own grant.
        let again = pool.acquire(21 * SEC, &t, 10 * SEC, &holder()).unwrap();
        assert_eq!((again.id, again.fence), (moved.id, moved.fence));
    }

    #[test]
    fn a_lease_is_live_until_its_end_not_at_it() {
        let mut pool = Pool::new(0);
        pool.acquire(Duration::ZERO, &token(), 10 * SEC, &holder())
            .unwrap();
        assert_eq!(pool.live(10 * SEC - Duration::from_nanos(1)), 1);
        assert_eq!(pool.live(10 * SEC), 0);
    }

    #[test]
    fn released_and_renewed_ids_are_never_reclaimed_through_a_stale_entry() {
        let mut pool = Pool::new(2);
        let (a, b, c) = (token(), token(), token());
        pool.acquire(Duration::ZERO, &a, 10 * SEC, &holder())
            .unwrap(); // ID 0, ends at 10 s
        pool.acquire(Duration::ZERO, &b, 10 * SEC, &holder())
            .unwrap(); // ID 1, ends at 10 s
        pool.acquire(Duration::ZERO, &c, 10 * SEC, &holder())
            .unwrap(); // ID 2, ends at 10 s
                       // ID 0 renewed to 100 s, ID 1 released at 5 s: their 10 s entries
                       // are stale.
        pool.renew(SEC, WorkerId::from(0), &a, 99 * SEC, 0).unwrap();
        pool.release(5 * SEC, WorkerId::from(1), &b, 0).unwrap();
        // At 20 s: ID 2 expired at 10 s, ID 1 was released at 5 s (free
        // longer), ID 0 is live.
        assert_eq!(
            pool.acquire(20 * SEC, &token(), SEC, &holder())
                .unwrap()
                .id
                .get(),
            1
        );
        assert_eq!(
            pool.acquire(20 * SEC, &token(), SEC, &holder())
                .unwrap()
                .id
                .get(),
            2
        );
        assert!(matches!(
            pool.acquire(20 * SEC, &token(), SEC, &holder()),
            Err(Error::NoAvailableId { .. })
        ));
        assert!(pool.renew(20 * SEC, WorkerId::from(0), &a, SEC, 0).is_ok());
    }
}
