//! The reference store of the teeth tests: a deliberately simple store (a
//! scan per acquire) that is correct unless one flaw is set.

#[path = "flaw.rs"]
mod flaw;
#[path = "persisted.rs"]
mod persisted;

pub use flaw::Flaw;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use workerid_core::{
    Capabilities, Error, Grant, Holder, LeaseInfo, LeaseState, LeaseStore, Listing, Namespace,
    NamespaceInfo, Result, Token, WorkerId,
};
use workerid_memory::{ManualClock, MonotonicClock};

#[derive(Debug)]
struct Slot {
    holder: Option<Token>,
    last_holder: Option<Token>,
    label: Holder,
    expires_at: Duration,
    ttl: Duration,
    fence: u64,
    watermark: u64,
    /// Renewals so far (what [`Flaw::RenewalsConflict`] compares).
    renewals: u64,
}

#[derive(Debug, Default)]
pub struct State {
    pool_sizes: HashMap<String, u32>,
    slots: HashMap<(String, u32), Slot>,
}

/// A deliberately simple store (a scan per acquire): correct unless `flaw` is set.
#[derive(Debug, Clone)]
pub struct ReferenceStore {
    pub flaw: Option<Flaw>,
    /// A handle cut off from its (imaginary) server: every call fails.
    pub cut: bool,
    /// Keeps an expired (not released) ID from acquirers for one more ttl.
    pub quarantine: bool,
    pub clock: Arc<ManualClock>,
    pub state: Arc<Mutex<State>>,
    /// A file that holds the state instead, shared with other processes.
    pub file: Option<Arc<PathBuf>>,
    /// This handle's own record of the leases it acquired or renewed, and
    /// the expiry it counts on for each (`RenewsByItsOwnRecord`); each
    /// handle a factory connects has its own.
    pub own: Arc<Mutex<OwnRecord>>,
}

/// Per namespace, worker ID and token: the expiry a handle counts on.
pub type OwnRecord = std::collections::HashMap<(String, u32, Token), Duration>;

impl ReferenceStore {
    fn has(&self, flaw: Flaw) -> bool {
        self.flaw == Some(flaw)
    }

    /// The state, for one critical section (read from the file, if any,
    /// and written back when the section ends).
    fn held(&self) -> persisted::Held<'_> {
        persisted::Held::new(
            self.state.lock().unwrap(),
            self.file.as_deref().map(PathBuf::as_path),
            !self.has(Flaw::LocksInProcessOnly),
        )
    }

    /// On a handle cut off from its server: `Unavailable`, or what `flaw`
    /// answers instead. `None` on a working handle.
    fn when_cut<T>(&self, flaw: Flaw, instead: impl FnOnce() -> Result<T>) -> Option<Result<T>> {
        if !self.cut {
            None
        } else if self.has(flaw) {
            Some(instead())
        } else {
            Some(Err(Error::unavailable("reference", "cut off")))
        }
    }

    fn key(&self, namespace: &Namespace, id: u32) -> (String, u32) {
        let ns = if self.has(Flaw::NamespacesShared) {
            String::new()
        } else if self.has(Flaw::NamespacesIgnoreCase) {
            namespace.as_str().to_lowercase()
        } else {
            namespace.to_string()
        };
        (ns, id)
    }

    /// Keeps a lease this handle acquired or renewed in its own record.
    fn record(&self, namespace: &Namespace, id: u32, token: &Token, ttl: Duration) {
        if self.has(Flaw::RenewsByItsOwnRecord) {
            let key = (namespace.to_string(), id, *token);
            self.own.lock().unwrap().insert(key, self.expires_at(ttl));
        }
    }

    fn expires_at(&self, ttl: Duration) -> Duration {
        let ttl = if self.has(Flaw::TtlRoundedUpToSeconds) {
            Duration::from_secs(ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0))
        } else {
            ttl
        };
        self.clock.now() + ttl
    }

    fn is_live(&self, slot: &Slot) -> bool {
        let now = self.clock.now();
        let live = if self.has(Flaw::ExpiresEarly) {
            now + Duration::from_millis(1) < slot.expires_at
        } else if self.has(Flaw::LiveAtItsEnd) {
            now <= slot.expires_at
        } else {
            now < slot.expires_at
        };
        slot.holder.is_some() && (self.has(Flaw::NeverExpires) || live)
    }

    /// An expired lease not released, within one ttl after its end.
    fn in_quarantine(&self, slot: &Slot) -> bool {
        self.quarantine && slot.holder.is_some() && self.clock.now() < slot.expires_at + slot.ttl
    }

    fn raise(&self, slot: &mut Slot, watermark: u64) {
        slot.watermark = if self.has(Flaw::WatermarkOverwritten) {
            watermark
        } else if self.has(Flaw::WatermarkAsFloat) {
            (slot.watermark as f64).max(watermark as f64) as u64
        } else {
            slot.watermark.max(watermark)
        };
    }

    fn find_free(&self, state: &State, namespace: &Namespace, max: u32) -> Option<u32> {
        let end = if self.has(Flaw::GrantsOutsideThePool) {
            max + 1
        } else {
            max
        };
        (0..=end).find(|&id| {
            state
                .slots
                .get(&self.key(namespace, id))
                .is_none_or(|slot| !self.is_live(slot) && !self.in_quarantine(slot))
        })
    }

    /// Checks the pool size and finds a free ID.
    fn pick(&self, state: &mut State, namespace: &Namespace, max: u32) -> Result<u32> {
        let stored = *state.pool_sizes.entry(namespace.to_string()).or_insert(max);
        if stored != max && !self.has(Flaw::PoolSizeForgotten) {
            return Err(Error::ConfigMismatch {
                namespace: namespace.to_string(),
                stored,
                requested: max,
            });
        }
        self.find_free(state, namespace, max)
            .ok_or(Error::NoAvailableId { max_worker_id: max })
    }

    /// The live lease `token` holds in `namespace`, extended: the answer to
    /// an acquire sent again.
    fn sent_again(
        &self,
        state: &mut State,
        namespace: &Namespace,
        max: u32,
        token: &Token,
        ttl: Duration,
    ) -> Option<Grant> {
        if self.has(Flaw::ResentAcquireGrantsAgain)
            || state.pool_sizes.get(namespace.as_str()) != Some(&max)
        {
            return None;
        }
        // The granted slots of the namespace, not its whole pool (up to 2^22).
        let shared = self.key(namespace, 0).0;
        let id = state
            .slots
            .iter()
            .filter(|((ns, id), _)| *ns == shared && *id <= max)
            .find(|(_, slot)| {
                slot.holder == Some(*token)
                    && (self.is_live(slot) || self.has(Flaw::ResentAcquireFindsExpired))
            })
            .map(|((_, id), _)| *id)?;
        let expires_at = self.expires_at(ttl);
        let slot = state.slots.get_mut(&self.key(namespace, id))?;
        if !self.has(Flaw::ResentAcquireNotExtended) {
            slot.expires_at = expires_at;
        }
        Some(Grant {
            id: WorkerId::from(id),
            fence: slot.fence,
            previous_watermark: slot.watermark,
        })
    }

    /// Grants `id` to `token`.
    fn grant(
        &self,
        state: &mut State,
        namespace: &Namespace,
        id: u32,
        token: &Token,
        ttl: Duration,
        label: &Holder,
    ) -> Grant {
        let slot = state.slots.entry(self.key(namespace, id)).or_insert(Slot {
            holder: None,
            last_holder: None,
            label: label.clone(),
            expires_at: Duration::ZERO,
            ttl: Duration::ZERO,
            fence: 0,
            watermark: 0,
            renewals: 0,
        });
        slot.holder = Some(*token);
        slot.last_holder = Some(*token);
        if !self.has(Flaw::HolderLabelNeverReplaced) {
            slot.label = label.clone();
        }
        if self.has(Flaw::HolderLabelTruncated) {
            slot.label = Holder::new(&slot.label.as_str()[..slot.label.as_str().len().min(64)])
                .expect("a prefix of a label is a label");
        }
        slot.expires_at = self.expires_at(ttl);
        slot.ttl = ttl;
        slot.fence = if self.has(Flaw::FenceNeverRises) {
            1
        } else {
            slot.fence + 1
        };
        let previous_watermark = if self.has(Flaw::WatermarkNotHandedOver) {
            0
        } else {
            slot.watermark
        };
        Grant {
            id: WorkerId::from(id),
            fence: slot.fence,
            previous_watermark,
        }
    }

    fn same_token(&self, a: &Token, b: &Token) -> bool {
        if self.has(Flaw::TokensIgnoreCase) {
            a.to_string().eq_ignore_ascii_case(&b.to_string())
        } else {
            a == b
        }
    }

    /// Checks the token as the contract says, except where a flaw skips a check.
    fn check(
        &self,
        slot: Option<&Slot>,
        id: WorkerId,
        token: &Token,
        ignore_token: bool,
    ) -> Result<()> {
        let slot = slot.ok_or(Error::NotAssigned { id })?;
        match slot.holder {
            None if self.has(Flaw::ReleasedStillRenewable) => Ok(()),
            None if self.has(Flaw::ReleasedIdIsMismatch) && slot.last_holder != Some(*token) => {
                Err(Error::TokenMismatch { id })
            }
            None => Err(Error::NotAssigned { id }),
            Some(_) if self.has(Flaw::ExpiredIsExpiredForAnyToken) && !self.is_live(slot) => {
                Err(Error::TokenExpired { id })
            }
            Some(holder) if !self.same_token(&holder, token) && !ignore_token => {
                Err(Error::TokenMismatch { id })
            }
            Some(_) if !self.is_live(slot) => Err(Error::TokenExpired { id }),
            Some(_) => Ok(()),
        }
    }
}

#[async_trait]
impl LeaseStore for ReferenceStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            list: true,
            quarantine: self.quarantine || self.has(Flaw::QuarantineNotKept),
            // A restart (of the factory) keeps the state: durable.
            durable: true,
            ..Capabilities::default()
        }
    }

    async fn acquire(
        &self,
        namespace: &Namespace,
        max: u32,
        token: &Token,
        ttl: Duration,
        label: &Holder,
    ) -> Result<Grant> {
        if let Some(answer) = self.when_cut(Flaw::CutAcquireIsNoAvailableId, || {
            Err(Error::NoAvailableId { max_worker_id: max })
        }) {
            return answer;
        }
        if self.has(Flaw::RacyAcquire) {
            // Check, then act in a second critical section: racers in
            // between see the same free ID.
            let id = self.pick(&mut self.held(), namespace, max)?;
            tokio::time::sleep(Duration::from_millis(2)).await;
            let mut state = self.held();
            return Ok(self.grant(&mut state, namespace, id, token, ttl, label));
        }
        let mut state = self.held();
        let grant = match self.sent_again(&mut state, namespace, max, token, ttl) {
            Some(grant) => grant,
            None => {
                let id = self.pick(&mut state, namespace, max)?;
                self.grant(&mut state, namespace, id, token, ttl, label)
            }
        };
        self.record(namespace, grant.id.get(), token, ttl);
        Ok(grant)
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        if let Some(answer) = self.when_cut(Flaw::CutRenewIsOk, || Ok(())) {
            return answer;
        }
        if self.has(Flaw::RenewsByItsOwnRecord) {
            let key = (namespace.to_string(), id.get(), *token);
            let mut own = self.own.lock().unwrap();
            if own.get(&key).is_some_and(|&until| until > self.clock.now()) {
                own.insert(key, self.expires_at(ttl));
                return Ok(());
            }
        }
        if self.has(Flaw::RenewalsConflict) {
            let key = self.key(namespace, id.get());
            let seen = self
                .state
                .lock()
                .unwrap()
                .slots
                .get(&key)
                .map(|s| s.renewals);
            tokio::time::sleep(Duration::from_millis(2)).await;
            let mut state = self.held();
            let slot = state.slots.get_mut(&key);
            if slot.as_ref().map(|s| s.renewals) != seen {
                return Err(Error::unavailable("reference", "serialization failure"));
            }
            if let Some(slot) = slot {
                slot.renewals += 1;
            }
        }
        let mut state = self.held();
        let key = self.key(namespace, id.get());
        let slot = state.slots.get_mut(&key);
        let revive = self.has(Flaw::RenewRevivesExpired)
            && slot.as_ref().is_some_and(|s| s.holder == Some(*token));
        if !revive {
            let checked = self.check(
                slot.as_deref(),
                id,
                token,
                self.has(Flaw::RenewIgnoresToken),
            );
            if let (Err(refusal), Some(slot)) = (&checked, state.slots.get_mut(&key)) {
                let leaks = match refusal {
                    Error::TokenMismatch { .. } => {
                        if self.has(Flaw::MismatchedRenewExtends) {
                            slot.expires_at = self.expires_at(ttl);
                        }
                        self.has(Flaw::MismatchedRenewRaisesWatermark)
                    }
                    Error::TokenExpired { .. } => self.has(Flaw::ExpiredRenewRaisesWatermark),
                    Error::NotAssigned { .. } => self.has(Flaw::ReleasedRenewRaisesWatermark),
                    _ => false,
                };
                if leaks {
                    self.raise(slot, watermark);
                }
            }
            checked?;
        }
        let slot = state.slots.get_mut(&key).ok_or(Error::NotAssigned { id })?;
        if !self.has(Flaw::RenewDoesNotExtend) {
            slot.expires_at = self.expires_at(ttl);
        }
        self.raise(slot, watermark);
        self.record(namespace, id.get(), token, ttl);
        Ok(())
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        if self.cut {
            return Err(Error::unavailable("reference", "cut off"));
        }
        let mut state = self.held();
        let key = self.key(namespace, id.get());
        let slot = state.slots.get_mut(&key);
        match self.check(
            slot.as_deref(),
            id,
            token,
            self.has(Flaw::ReleaseIgnoresToken),
        ) {
            Err(Error::TokenExpired { .. }) if self.has(Flaw::ExpiredReleaseIsOk) => {}
            Err(refusal) => {
                let leaks = match refusal {
                    Error::TokenMismatch { .. } => self.has(Flaw::MismatchedReleaseSetsWatermark),
                    Error::TokenExpired { .. } => self.has(Flaw::ExpiredReleaseSetsWatermark),
                    _ => false,
                };
                if let Some(slot) = state.slots.get_mut(&key).filter(|_| leaks) {
                    slot.watermark = watermark;
                }
                return Err(refusal);
            }
            Ok(()) => {}
        }
        let slot = state.slots.get_mut(&key).ok_or(Error::NotAssigned { id })?;
        let sets = if watermark == 0 {
            self.has(Flaw::ReleaseOfZeroClearsWatermark)
        } else {
            !self.has(Flaw::ReleaseRaisesOnly)
        };
        if sets {
            slot.watermark = watermark;
        } else {
            self.raise(slot, watermark);
        }
        if !self.has(Flaw::ReleaseKeepsTheId) {
            slot.holder = None;
        }
        Ok(())
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        if let Some(answer) = self.when_cut(Flaw::CutListIsEmpty, || Ok(Listing::unknown())) {
            return answer;
        }
        let state = self.held();
        let Some(&max) = state.pool_sizes.get(namespace.as_str()) else {
            return Ok(Listing::unknown());
        };
        let now = self.clock.now();
        // The granted IDs of the namespace, in order (not its whole pool).
        let shared = self.key(namespace, 0).0;
        let mut ids: Vec<u32> = state
            .slots
            .keys()
            .filter(|(ns, id)| *ns == shared && *id <= max)
            .map(|(_, id)| *id)
            .collect();
        ids.sort_unstable();
        let leases = ids
            .into_iter()
            .filter_map(|id| {
                let slot = state.slots.get(&self.key(namespace, id))?;
                let state = match LeaseState::judge(slot.holder.is_some(), slot.expires_at, now) {
                    LeaseState::Expired if self.has(Flaw::ListsExpiredAsLive) => LeaseState::Live {
                        remaining: Duration::from_secs(1),
                    },
                    LeaseState::Free if self.has(Flaw::ListOmitsReleased) => return None,
                    state => state,
                };
                Some(LeaseInfo {
                    id: WorkerId::from(id),
                    state,
                    fence: slot.fence,
                    watermark: slot.watermark,
                    holder: slot.label.clone(),
                })
            })
            .collect();
        Ok(Listing {
            max_worker_id: Some(max),
            leases,
        })
    }

    async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        if self.cut {
            return Err(Error::unavailable("reference", "cut off"));
        }
        let mut names: Vec<String> = self
            .state
            .lock()
            .unwrap()
            .pool_sizes
            .keys()
            .cloned()
            .collect();
        names.sort_unstable();
        let mut all = Vec::new();
        for name in names {
            let namespace = Namespace::new(name.as_str()).unwrap();
            let listing = self.list(&namespace).await?;
            let counted = |l: &&LeaseInfo| {
                l.state.is_live()
                    || (self.has(Flaw::NamespacesCountReleased) && l.state == LeaseState::Free)
                    || (self.has(Flaw::NamespacesCountExpired) && l.state == LeaseState::Expired)
            };
            let live = listing.leases.iter().filter(counted).count() as u32;
            if live == 0 && self.has(Flaw::NamespacesWithoutLiveLeasesUnlisted) {
                continue;
            }
            all.push(NamespaceInfo {
                max_worker_id: listing.max_worker_id.unwrap(),
                live,
                namespace,
            });
        }
        Ok(all)
    }

    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        if self.cut {
            return Err(Error::unavailable("reference", "cut off"));
        }
        let mut state = self.held();
        if !state.pool_sizes.contains_key(namespace.as_str()) {
            return Ok(false);
        }
        let shared = self.key(namespace, 0).0;
        let live = state
            .slots
            .iter()
            .filter(|(key, slot)| key.0 == shared && self.is_live(slot))
            .count() as u32;
        if live > 0 && !self.has(Flaw::RemoveIgnoresLiveLeases) {
            return Err(Error::NamespaceInUse {
                namespace: namespace.to_string(),
                live,
            });
        }
        state.pool_sizes.remove(namespace.as_str());
        if !self.has(Flaw::RemoveKeepsTheIds) {
            state.slots.retain(|key, _| key.0 != shared);
        }
        Ok(true)
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        if self.cut {
            return Err(Error::unavailable("reference", "cut off"));
        }
        let mut state = self.held();
        let key = self.key(namespace, id.get());
        let live = state.slots.get(&key).is_some_and(|s| {
            self.is_live(s) || self.has(Flaw::ForceReleaseTakesExpired) && s.holder.is_some()
        });
        let Some(slot) = state.slots.get_mut(&key).filter(|_| live) else {
            return Ok(false);
        };
        if self.has(Flaw::ForceReleaseLowersWatermark) {
            slot.watermark = 0;
        }
        if !self.has(Flaw::ForceReleaseKeepsTheHolder) {
            slot.holder = None;
        }
        Ok(true)
    }
}
