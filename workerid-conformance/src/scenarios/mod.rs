//! The scenarios: one `pub async fn` per rule of the contract.
//!
//! Each takes the [`StoreFactory`] of the store under test, works in a fresh
//! namespace of its own, panics with a message naming the broken rule, and
//! returns [`Outcome::Passed`](crate::Outcome::Passed) or
//! [`Outcome::Skipped`](crate::Outcome::Skipped).

mod contention;
mod durability;
mod grants;
mod handles;
mod history;
mod input;
mod lifecycle;
mod listing;
mod processes;
mod removal;
mod resent;
mod unreachable;

pub use contention::*;
pub use durability::*;
pub use grants::*;
pub use handles::*;
pub use history::*;
pub use input::*;
pub use lifecycle::*;
pub use listing::*;
pub(crate) use processes::CONTENDER_ENV;
pub use processes::*;
pub use removal::*;
pub use resent::*;
pub use unreachable::*;

use crate::StoreFactory;

/// Calls `$then!` (a macro of this crate) with its arguments followed by
/// the name of every lease scenario, in run order: the one list that
/// [`ALL`] and [`lease_store_tests!`](crate::lease_store_tests) are made from.
#[doc(hidden)]
#[macro_export]
macro_rules! __lease_scenarios {
    ($then:ident! { $($args:tt)* }) => {
        $crate::$then! { $($args)*
            grants_distinct_ids_until_exhausted,
            an_acquire_sent_again_finds_its_grant,
            overlapping_acquires_with_one_token_make_one_grant,
            tokens_are_22_url_safe_characters,
            smallest_and_largest_pools,
            renew_extends_the_lease,
            wrong_token_changes_nothing,
            unassigned_ids_are_not_assigned,
            expired_lease_is_token_expired,
            release_frees_at_once,
            expired_id_is_reclaimed,
            expiry_has_millisecond_precision,
            expired_ids_are_quarantined,
            invalid_input_changes_nothing,
            namespaces_are_isolated,
            pool_size_mismatch_is_refused,
            fence_rises_on_every_grant,
            watermark_is_handed_over,
            contention_gives_distinct_grants,
            one_winner_on_an_expired_id,
            contention_across_processes,
            concurrent_renewals_all_succeed,
            a_lease_is_one_lease_through_every_handle,
            release_races_renew_and_acquire,
            an_unreachable_store_is_unavailable,
            survives_restart,
            listing_shows_every_granted_id,
            listing_names_each_holder,
            force_release_frees_a_live_id,
            namespaces_are_listed,
            remove_namespace_only_when_nothing_is_live,
        }
    };
}

crate::__lease_scenarios!(__registry! {
    /// Every scenario, in the order [`run_all`](crate::run_all) runs them.
    ALL: dyn StoreFactory;
});
