//! The suite has teeth: a simple reference store passes it, and every
//! deliberately broken variant of that store fails it, in the scenario that
//! guards the broken rule.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use workerid_conformance::{run_all, Report, StoreFactory};
use workerid_core::{
    Capabilities, Error, Grant, Holder, LeaseInfo, LeaseState, LeaseStore, Listing, Namespace,
    NamespaceInfo, Result, Token, WorkerId,
};
use workerid_memory::{ManualClock, MonotonicClock};

/// One way to break the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// Renew extends whatever token is given.
    RenewIgnoresToken,
    /// Release frees the ID whatever token is given.
    ReleaseIgnoresToken,
    /// Acquire reads a free ID, awaits, then writes: racers share IDs.
    RacyAcquire,
    /// Every grant gets fence 1.
    FenceNeverRises,
    /// Renew overwrites the watermark instead of keeping the maximum.
    WatermarkOverwritten,
    /// Release keeps the maximum instead of setting its holder's final word.
    ReleaseRaisesOnly,
    /// A release of watermark 0 sets it to 0 instead of keeping it.
    ReleaseOfZeroClearsWatermark,
    /// Acquire always reports a previous watermark of 0.
    WatermarkNotHandedOver,
    /// The watermark is kept as an f64 (as a naive Lua script would).
    WatermarkAsFloat,
    /// Leases never expire.
    NeverExpires,
    /// Renew revives an expired lease.
    RenewRevivesExpired,
    /// An expired lease answers `TokenExpired` to any token, not
    /// `TokenMismatch` to another's.
    ExpiredIsExpiredForAnyToken,
    /// Lease lengths are rounded up to whole seconds.
    TtlRoundedUpToSeconds,
    /// All namespaces share one pool.
    NamespacesShared,
    /// A namespace does not remember its pool size.
    PoolSizeForgotten,
    /// Release answers Ok but leaves the ID held.
    ReleaseKeepsTheId,
    /// Release of an expired lease answers Ok instead of TokenExpired.
    ExpiredReleaseIsOk,
    /// A released ID still accepts its old token.
    ReleasedStillRenewable,
    /// Namespaces that differ only in case share a pool (a case-insensitive collation).
    NamespacesIgnoreCase,
    /// Tokens are compared without regard to case.
    TokensIgnoreCase,
    /// A released ID answers TokenMismatch to a token other than its last holder's.
    ReleasedIdIsMismatch,
    /// Acquire grants an ID one past the end of the pool.
    GrantsOutsideThePool,
    /// A listing shows an expired lease as live (a stale entry).
    ListsExpiredAsLive,
    /// A listing leaves released IDs out.
    ListOmitsReleased,
    /// An ID keeps the holder label of its first grant.
    HolderLabelNeverReplaced,
    /// Holder labels are cut to 64 bytes (a column too narrow).
    HolderLabelTruncated,
    /// A forced release resets the watermark to 0.
    ForceReleaseLowersWatermark,
    /// A forced release answers true but leaves the holder's lease in place.
    ForceReleaseKeepsTheHolder,
    /// A forced release of an expired ID marks it released and answers true.
    ForceReleaseTakesExpired,
    /// Removes a namespace even while a lease in it is live.
    RemoveIgnoresLiveLeases,
    /// Removing a namespace forgets its pool size but keeps its IDs' state.
    RemoveKeepsTheIds,
    /// Counts released IDs as live when listing namespaces.
    NamespacesCountReleased,
    /// Declares a quarantine of expired IDs but grants them at once.
    QuarantineNotKept,
    /// An acquire sent again with its token makes a second grant.
    ResentAcquireGrantsAgain,
    /// An acquire sent again answers its grant without extending the lease.
    ResentAcquireNotExtended,
    /// An acquire sent again answers its token's expired lease as its grant.
    ResentAcquireFindsExpired,
    /// A renew refused for another token still raises the watermark.
    MismatchedRenewRaisesWatermark,
    /// A renew refused for another token still extends the lease.
    MismatchedRenewExtends,
    /// A release refused for another token still sets the watermark.
    MismatchedReleaseSetsWatermark,
    /// A renew answered `TokenExpired` still raises the watermark.
    ExpiredRenewRaisesWatermark,
    /// A release answered `TokenExpired` still sets the watermark.
    ExpiredReleaseSetsWatermark,
    /// A renew of a released ID, answered `NotAssigned`, still raises the watermark.
    ReleasedRenewRaisesWatermark,
    /// Namespaces with no live lease are left out of the namespace list.
    NamespacesWithoutLiveLeasesUnlisted,
    /// The namespace list counts expired leases as live.
    NamespacesCountExpired,
}

#[derive(Debug)]
struct Slot {
    holder: Option<Token>,
    last_holder: Option<Token>,
    label: Holder,
    expires_at: Duration,
    ttl: Duration,
    fence: u64,
    watermark: u64,
}

#[derive(Debug, Default)]
struct State {
    pool_sizes: HashMap<String, u32>,
    slots: HashMap<(String, u32), Slot>,
}

/// A deliberately simple store (a scan per acquire): correct unless `flaw` is set.
#[derive(Debug, Clone)]
struct ReferenceStore {
    flaw: Option<Flaw>,
    /// Keeps an expired (not released) ID from acquirers for one more ttl.
    quarantine: bool,
    clock: Arc<ManualClock>,
    state: Arc<Mutex<State>>,
}

impl ReferenceStore {
    fn has(&self, flaw: Flaw) -> bool {
        self.flaw == Some(flaw)
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

    fn expires_at(&self, ttl: Duration) -> Duration {
        let ttl = if self.has(Flaw::TtlRoundedUpToSeconds) {
            Duration::from_secs(ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0))
        } else {
            ttl
        };
        self.clock.now() + ttl
    }

    fn is_live(&self, slot: &Slot) -> bool {
        slot.holder.is_some()
            && (self.has(Flaw::NeverExpires) || self.clock.now() < slot.expires_at)
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
        if self.has(Flaw::RacyAcquire) {
            // Check, then act in a second critical section: racers in
            // between see the same free ID.
            let id = self.pick(&mut self.state.lock().unwrap(), namespace, max)?;
            tokio::time::sleep(Duration::from_millis(2)).await;
            let mut state = self.state.lock().unwrap();
            return Ok(self.grant(&mut state, namespace, id, token, ttl, label));
        }
        let mut state = self.state.lock().unwrap();
        if let Some(grant) = self.sent_again(&mut state, namespace, max, token, ttl) {
            return Ok(grant);
        }
        let id = self.pick(&mut state, namespace, max)?;
        Ok(self.grant(&mut state, namespace, id, token, ttl, label))
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        let mut state = self.state.lock().unwrap();
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
        slot.expires_at = self.expires_at(ttl);
        self.raise(slot, watermark);
        Ok(())
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        let mut state = self.state.lock().unwrap();
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
        let state = self.state.lock().unwrap();
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
        let mut state = self.state.lock().unwrap();
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
        let mut state = self.state.lock().unwrap();
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

struct Factory(ReferenceStore);

#[async_trait]
impl StoreFactory for Factory {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.0.clone())
    }
    async fn advance(&self, duration: Duration) {
        self.0.clock.advance(duration);
    }
    fn virtual_time(&self) -> bool {
        true
    }
}

async fn report(flaw: Option<Flaw>) -> Report {
    report_with(flaw, false).await
}

async fn report_with(flaw: Option<Flaw>, quarantine: bool) -> Report {
    let store = ReferenceStore {
        flaw,
        quarantine,
        clock: Arc::new(ManualClock::new()),
        state: Arc::default(),
    };
    run_all(&Factory(store)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_flawless_reference_store_passes() {
    report(None).await.assert_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_flawless_reference_store_with_a_quarantine_passes() {
    let report = report_with(None, true).await;
    report.assert_passed();
    assert!(
        !report.skipped().contains(&"expired_ids_are_quarantined"),
        "a store that declares a quarantine is checked for it"
    );
}

/// One test per flaw: the suite must fail, and in the scenario named.
macro_rules! caught {
    ($($test:ident: $flaw:ident by $scenario:ident;)+) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $test() {
            let report = report(Some(Flaw::$flaw)).await;
            let failed = report.failed();
            assert!(
                failed.contains(&stringify!($scenario)),
                "the suite must catch {:?} in {}; failed: {failed:?}",
                Flaw::$flaw,
                stringify!($scenario),
            );
        }
    )+};
}

caught! {
    catches_renew_ignoring_the_token: RenewIgnoresToken by wrong_token_changes_nothing;
    catches_release_ignoring_the_token: ReleaseIgnoresToken by wrong_token_changes_nothing;
    catches_a_racy_acquire: RacyAcquire by contention_gives_distinct_grants;
    catches_a_racy_acquire_on_one_expired_id: RacyAcquire by one_winner_on_an_expired_id;
    catches_a_fence_that_never_rises: FenceNeverRises by fence_rises_on_every_grant;
    catches_an_overwritten_watermark: WatermarkOverwritten by watermark_is_handed_over;
    catches_a_watermark_not_handed_over: WatermarkNotHandedOver by watermark_is_handed_over;
    catches_a_float_watermark: WatermarkAsFloat by watermark_is_handed_over;
    catches_a_release_that_only_raises: ReleaseRaisesOnly by watermark_is_handed_over;
    catches_a_release_of_zero_that_clears: ReleaseOfZeroClearsWatermark by watermark_is_handed_over;
    catches_leases_that_never_expire: NeverExpires by expired_id_is_reclaimed;
    catches_renew_reviving_an_expired_lease: RenewRevivesExpired by expired_lease_is_token_expired;
    catches_ttls_rounded_to_seconds: TtlRoundedUpToSeconds by expiry_has_millisecond_precision;
    catches_shared_namespaces: NamespacesShared by namespaces_are_isolated;
    catches_a_forgotten_pool_size: PoolSizeForgotten by pool_size_mismatch_is_refused;
    catches_a_release_that_keeps_the_id: ReleaseKeepsTheId by release_frees_at_once;
    catches_ok_for_an_expired_release: ExpiredReleaseIsOk by expired_lease_is_token_expired;
    catches_expired_for_another_token: ExpiredIsExpiredForAnyToken by expired_lease_is_token_expired;
    catches_a_forced_release_of_an_expired_id: ForceReleaseTakesExpired by expired_lease_is_token_expired;
    catches_a_released_id_still_renewable: ReleasedStillRenewable by unassigned_ids_are_not_assigned;
    catches_grants_outside_the_pool: GrantsOutsideThePool by grants_distinct_ids_until_exhausted;
    catches_mismatch_for_a_released_id: ReleasedIdIsMismatch by unassigned_ids_are_not_assigned;
    catches_case_insensitive_namespaces: NamespacesIgnoreCase by namespaces_are_isolated;
    catches_case_insensitive_tokens: TokensIgnoreCase by wrong_token_changes_nothing;
    catches_an_expired_lease_listed_as_live: ListsExpiredAsLive by listing_shows_every_granted_id;
    catches_a_listing_without_released_ids: ListOmitsReleased by listing_shows_every_granted_id;
    catches_a_holder_label_never_replaced: HolderLabelNeverReplaced by listing_names_each_holder;
    catches_a_truncated_holder_label: HolderLabelTruncated by listing_names_each_holder;
    catches_a_forced_release_that_lowers_the_watermark: ForceReleaseLowersWatermark by force_release_frees_a_live_id;
    catches_a_forced_release_that_keeps_the_holder: ForceReleaseKeepsTheHolder by force_release_frees_a_live_id;
    catches_a_quarantine_declared_but_not_kept: QuarantineNotKept by expired_ids_are_quarantined;
    catches_released_ids_counted_live: NamespacesCountReleased by namespaces_are_listed;
    catches_a_removal_despite_live_leases: RemoveIgnoresLiveLeases by remove_namespace_only_when_nothing_is_live;
    catches_a_removal_that_keeps_the_ids: RemoveKeepsTheIds by remove_namespace_only_when_nothing_is_live;
    catches_a_second_grant_to_an_acquire_sent_again: ResentAcquireGrantsAgain by an_acquire_sent_again_finds_its_grant;
    catches_an_acquire_sent_again_not_extended: ResentAcquireNotExtended by an_acquire_sent_again_finds_its_grant;
    catches_an_expired_lease_answered_again: ResentAcquireFindsExpired by an_acquire_sent_again_finds_its_grant;
    catches_a_mismatched_renew_that_raises_the_watermark: MismatchedRenewRaisesWatermark by wrong_token_changes_nothing;
    catches_a_mismatched_renew_that_extends: MismatchedRenewExtends by wrong_token_changes_nothing;
    catches_a_mismatched_release_that_sets_the_watermark: MismatchedReleaseSetsWatermark by wrong_token_changes_nothing;
    catches_an_expired_renew_that_raises_the_watermark: ExpiredRenewRaisesWatermark by expired_lease_is_token_expired;
    catches_an_expired_release_that_sets_the_watermark: ExpiredReleaseSetsWatermark by expired_lease_is_token_expired;
    catches_a_released_renew_that_raises_the_watermark: ReleasedRenewRaisesWatermark by unassigned_ids_are_not_assigned;
    catches_namespaces_without_live_leases_left_out: NamespacesWithoutLiveLeasesUnlisted by namespaces_are_listed;
    catches_expired_leases_counted_live: NamespacesCountExpired by namespaces_are_listed;
}
