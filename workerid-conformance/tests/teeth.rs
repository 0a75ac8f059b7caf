//! The suite has teeth: a simple reference store passes it, and every
//! deliberately broken variant of that store fails it, in the scenario that
//! guards the broken rule.

mod caught;
#[path = "teeth/reference.rs"]
mod reference;

use caught::caught;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reference::{Flaw, ReferenceStore};
use workerid_conformance::{run_all, Report, StoreFactory};
use workerid_core::LeaseStore;
use workerid_memory::ManualClock;

struct Factory(ReferenceStore);

#[async_trait]
impl StoreFactory for Factory {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        // A handle of its own, with its own record of its leases.
        Arc::new(ReferenceStore {
            own: Arc::default(),
            ..self.0.clone()
        })
    }
    async fn advance(&self, duration: Duration) {
        self.0.clock.advance(duration);
    }
    fn virtual_time(&self) -> bool {
        true
    }
    fn supports_restart(&self) -> bool {
        true
    }
    async fn restart(&self) {
        if self.0.flaw == Some(Flaw::ForgetsOnRestart) {
            *self.0.state.lock().unwrap() = Default::default();
        }
    }
    async fn unreachable(&self) -> Option<Arc<dyn LeaseStore>> {
        Some(Arc::new(ReferenceStore {
            cut: true,
            ..self.0.clone()
        }))
    }
}

async fn report(flaw: Option<Flaw>) -> Report {
    report_with(flaw, false).await
}

async fn report_with(flaw: Option<Flaw>, quarantine: bool) -> Report {
    run_all(&Factory(reference(flaw, quarantine, None))).await
}

fn reference(flaw: Option<Flaw>, quarantine: bool, file: Option<PathBuf>) -> ReferenceStore {
    ReferenceStore {
        flaw,
        cut: false,
        quarantine,
        clock: Arc::new(ManualClock::new()),
        state: Arc::default(),
        file: file.map(Arc::new),
        own: Arc::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_flawless_reference_store_passes() {
    let report = report(None).await;
    report.assert_passed();
    assert_eq!(
        report.skipped(),
        ["expired_ids_are_quarantined", "contention_across_processes"],
        "only a quarantine it does not declare and other processes (its state is in this one)"
    );
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

/// The state kept in a file passes every scenario in one process, and so
/// does a store that locks that file within its own process only: only
/// contenders in other processes can see that flaw (tests/teeth_processes.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_within_one_process_is_invisible_in_one_process() {
    for flaw in [None, Some(Flaw::LocksInProcessOnly)] {
        let path = std::env::temp_dir().join(format!(
            "workerid-teeth-{}-{flaw:?}.state",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let report = run_all(&Factory(reference(flaw, false, Some(path.clone())))).await;
        let _ = std::fs::remove_file(&path);
        report.assert_passed();
    }
}

/// The scenarios the suite fails on a reference store with `flaw`.
async fn failed(flaw: Option<Flaw>) -> Vec<&'static str> {
    report(flaw).await.failed()
}

// One test per flaw: the suite must fail, and in the scenario named.
caught! {
    catches_renew_ignoring_the_token: RenewIgnoresToken by wrong_token_changes_nothing;
    catches_a_handle_renewing_by_its_own_record: RenewsByItsOwnRecord by a_lease_is_one_lease_through_every_handle;
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
    catches_a_lease_that_ends_early: ExpiresEarly by expiry_has_millisecond_precision;
    catches_a_lease_live_at_its_end: LiveAtItsEnd by expiry_has_millisecond_precision;
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
    catches_a_full_pool_answered_when_cut_off: CutAcquireIsNoAvailableId by an_unreachable_store_is_unavailable;
    catches_a_renewal_that_swallows_the_error: CutRenewIsOk by an_unreachable_store_is_unavailable;
    catches_an_empty_listing_when_cut_off: CutListIsEmpty by an_unreachable_store_is_unavailable;
    catches_a_renewal_that_does_not_extend: RenewDoesNotExtend by renew_extends_the_lease;
    catches_renewals_that_conflict: RenewalsConflict by concurrent_renewals_all_succeed;
    catches_a_durable_store_that_forgets: ForgetsOnRestart by survives_restart;
}
