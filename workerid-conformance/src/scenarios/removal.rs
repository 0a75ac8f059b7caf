//! Removing a namespace: refused while a live lease holds one of its IDs,
//! complete otherwise. Skipped, saying so, for a store that declares
//! `list = false`.

use workerid_core::{Error, Listing};

use crate::support::{ns, Ctx};
use crate::{Outcome, StoreFactory};

/// A namespace never used is not removed (false). One with a live lease is
/// refused with `NamespaceInUse` and the live count, and nothing changes.
/// Once no lease is live (released or expired), it is removed (true): it
/// lists as never used, `list_namespaces` leaves it out, and it can be made
/// again with another pool size, its IDs' watermarks forgotten.
pub async fn remove_namespace_only_when_nothing_is_live(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "remove_namespace_only_when_nothing_is_live").await;
    if !ctx.caps.list {
        return Outcome::Skipped(
            "the store declares list = false: it cannot remove a namespace".into(),
        );
    }
    let name = ctx.namespace();
    let store = ctx.store().await;
    assert!(
        !store
            .remove_namespace(&ns(&name))
            .await
            .expect("remove a namespace never used"),
        "a namespace never used is not removed (false)"
    );
    let long = ctx.allocator(&name, 3, ctx.long).await;
    let short = ctx.allocator(&name, 3, ctx.short).await;
    let live = long.acquire().await.expect("acquire");
    let freed = long.acquire().await.expect("acquire");
    long.release_with_watermark(&freed, 900)
        .await
        .expect("release");
    let lapsing = short.acquire().await.expect("acquire");
    // The listing without the time left, which moves on by itself.
    let view = |listing: Listing| {
        let entries: Vec<_> = listing
            .leases
            .into_iter()
            .map(|l| (l.id, l.state.name(), l.fence, l.watermark, l.holder))
            .collect();
        (listing.max_worker_id, entries)
    };
    let before = view(store.list(&ns(&name)).await.expect("list"));
    match store.remove_namespace(&ns(&name)).await {
        Err(Error::NamespaceInUse { namespace, live }) => {
            assert_eq!(namespace, name, "NamespaceInUse names the namespace");
            assert_eq!(live, 2, "NamespaceInUse counts the live leases");
        }
        other => panic!("removing a namespace with live leases: got {other:?}"),
    }
    assert_eq!(
        view(store.list(&ns(&name)).await.expect("list")),
        before,
        "a refused removal changes nothing"
    );

    long.release(&live).await.expect("release");
    ctx.let_short_expire().await;
    let _ = lapsing;
    assert!(
        store
            .remove_namespace(&ns(&name))
            .await
            .expect("remove a namespace with no live lease"),
        "a namespace whose leases are released or expired is removed (true)"
    );
    assert_eq!(
        store.list(&ns(&name)).await.expect("list"),
        Listing::unknown(),
        "a removed namespace lists as never used"
    );
    let names = store.list_namespaces().await.expect("list namespaces");
    assert!(
        names.iter().all(|n| n.namespace.as_str() != name),
        "a removed namespace is not listed: {names:?}"
    );
    let again = ctx.allocator(&name, 7, ctx.long).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let lease = again
            .acquire()
            .await
            .expect("a removed namespace is made again, with another pool size");
        seen.push(lease.previous_watermark());
    }
    assert_eq!(
        seen,
        [0, 0, 0],
        "a namespace made again forgets its former IDs' watermarks"
    );
    Outcome::Passed
}
