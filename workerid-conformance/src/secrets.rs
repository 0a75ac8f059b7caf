//! Helpers for the TLS and credential tests of the store crates: one round
//! trip through every kind of operation, and checks that a password shows up
//! in no error and no `Debug`.

use std::error::Error as StdError;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use workerid_core::{Allocator, LeaseOptions, LeaseStore};
use workerid_segment::{SegmentStore, Tag};

/// Acquires, renews and releases a lease in `namespace`, then creates the
/// segment tag `namespace` (if missing) and reserves a range of it: the
/// store works end to end.
///
/// Panics on any error.
pub async fn round_trip<S>(store: S, namespace: &str)
where
    S: LeaseStore + SegmentStore + Clone,
{
    let options = LeaseOptions::new()
        .worker_bits(4)
        .max_lease_time(Duration::from_secs(60));
    let leases: Arc<dyn LeaseStore> = Arc::new(store.clone());
    let allocator = Allocator::from_arc(leases, namespace, options).expect("an allocator");
    let mut lease = allocator.acquire().await.expect("acquire");
    allocator.renew(&mut lease).await.expect("renew");
    allocator.release(&lease).await.expect("release");

    let tag = Tag::new(namespace).expect("a tag");
    store.create_tag(&tag, 1, 100).await.expect("create a tag");
    let range = store.reserve(&tag, Some(10)).await.expect("reserve");
    assert_eq!(range.len(), 10, "{range:?}");
}

/// Panics when any of `secrets` appears in `error`'s `Display` or `Debug`,
/// or in the `Display` or `Debug` of any error of its `source()` chain.
pub fn assert_error_hides(what: &str, error: &(dyn StdError + 'static), secrets: &[&str]) {
    let mut level: Option<&(dyn StdError + 'static)> = Some(error);
    let mut depth = 0;
    while let Some(e) = level {
        for shown in [e.to_string(), format!("{e:?}")] {
            for secret in secrets {
                assert!(
                    !shown.contains(secret),
                    "{what}: error (source depth {depth}) shows the secret {secret:?}: {shown}"
                );
            }
        }
        level = e.source();
        depth += 1;
    }
}

/// Panics when any of `secrets` appears in `value`'s `Debug` (plain and `{:#?}`).
pub fn assert_debug_hides(what: &str, value: &impl Debug, secrets: &[&str]) {
    for shown in [format!("{value:?}"), format!("{value:#?}")] {
        for secret in secrets {
            assert!(
                !shown.contains(secret),
                "{what}: Debug shows the secret {secret:?}: {shown}"
            );
        }
    }
}

/// The whole `source()` chain of `error`, one message after the other, for
/// assertions on what a message names.
pub fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut level = error.source();
    while let Some(e) = level {
        text.push_str(" <- ");
        text.push_str(&e.to_string());
        level = e.source();
    }
    text
}
