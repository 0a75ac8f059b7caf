//! The operator's optional methods: listing a namespace and forcing a
//! release. Skipped, saying so, for a store that declares `list = false`.

use workerid_core::{
    Holder, LeaseInfo, LeaseState, Listing, NamespaceInfo, WorkerId, MAX_HOLDER_LEN,
};

use crate::support::{expect_err, is, ns, Ctx};
use crate::{Outcome, StoreFactory};

fn skip(ctx: &Ctx<'_>) -> Option<Outcome> {
    (!ctx.caps.list).then(|| {
        Outcome::Skipped(
            "the store declares list = false: it cannot list leases or force a release".into(),
        )
    })
}

#[track_caller]
fn entry(listing: &Listing, id: WorkerId, what: &str) -> LeaseInfo {
    listing
        .get(id)
        .unwrap_or_else(|| panic!("{what}: worker ID {id} is not listed: {listing:?}"))
        .clone()
}

/// A listing shows the namespace's pool size and exactly the IDs ever
/// granted, ordered by ID: live (with the time left on the store's clock),
/// expired or free, each with its latest fence and its watermark. A namespace
/// never used lists nothing; listing changes nothing.
pub async fn listing_shows_every_granted_id(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "listing_shows_every_granted_id").await;
    if let Some(skipped) = skip(&ctx) {
        return skipped;
    }
    let name = ctx.namespace();
    let store = ctx.store().await;
    let listing = store
        .list(&ns(&name))
        .await
        .expect("list a namespace never used");
    assert_eq!(
        listing,
        Listing::unknown(),
        "a namespace never used has no pool size and no lease"
    );
    let long = ctx.allocator(&name, 4, ctx.long).await;
    let short = ctx.allocator(&name, 4, ctx.short).await;
    let mut live = long.acquire().await.expect("acquire");
    long.renew_with_watermark(&mut live, 500)
        .await
        .expect("renew");
    let mut expired = short.acquire().await.expect("acquire");
    short
        .renew_with_watermark(&mut expired, 600)
        .await
        .expect("renew");
    let freed = long.acquire().await.expect("acquire");
    long.release_with_watermark(&freed, 70)
        .await
        .expect("release");
    ctx.let_short_expire().await;

    let listing = long.list().await.expect("list");
    assert_eq!(listing.max_worker_id, Some(4), "the stored pool size");
    let mut granted = vec![live.id(), expired.id(), freed.id()];
    granted.sort();
    let listed: Vec<WorkerId> = listing.leases.iter().map(|l| l.id).collect();
    assert_eq!(
        listed, granted,
        "exactly the IDs ever granted, ordered by ID (never-granted IDs are not listed)"
    );
    let seen = entry(&listing, live.id(), "a live lease");
    match seen.state {
        LeaseState::Live { remaining } => assert!(
            remaining <= ctx.long && remaining > ctx.long / 2,
            "a lease of {:?} renewed {:?} ago has {remaining:?} left",
            ctx.long,
            ctx.short + ctx.short / 2
        ),
        other => panic!("a live lease is listed as {other:?}"),
    }
    assert_eq!((seen.fence, seen.watermark), (live.fence(), 500), "live");
    let seen = entry(&listing, expired.id(), "an expired lease");
    assert_eq!(
        (seen.state, seen.fence, seen.watermark),
        (LeaseState::Expired, expired.fence(), 600),
        "an expired lease: expired, its fence and watermark kept"
    );
    let seen = entry(&listing, freed.id(), "a released lease");
    assert_eq!(
        (seen.state, seen.fence, seen.watermark),
        (LeaseState::Free, freed.fence(), 70),
        "a released lease: free, its fence and watermark kept"
    );
    assert_eq!(
        store
            .list(&ns(&format!("{name}.other")))
            .await
            .expect("list"),
        Listing::unknown(),
        "another namespace sees none of these leases"
    );

    // Listing changed nothing; a new grant shows at once.
    let again = long.acquire().await.expect("acquire a free ID");
    let listing = long.list().await.expect("list");
    let seen = entry(&listing, again.id(), "a new grant");
    assert!(seen.state.is_live(), "a new grant is live: {seen:?}");
    assert_eq!(seen.fence, again.fence(), "a new grant's fence");
    let live_ids: Vec<WorkerId> = listing.live().map(|l| l.id).collect();
    let mut expected = vec![live.id(), again.id()];
    expected.sort();
    assert_eq!(live_ids, expected, "exactly the live leases are live");
    granted.push(again.id());
    granted.sort();
    granted.dedup();
    let listed: Vec<WorkerId> = listing.leases.iter().map(|l| l.id).collect();
    assert_eq!(listed, granted, "one entry per ID ever granted");
    Outcome::Passed
}

/// Every grant stores its holder's label, and the listing shows the label of
/// each ID's latest grant: a renewal keeps it, a release or an expiry leaves
/// the last holder's, the next grant replaces it. Labels of the longest
/// allowed length come back whole.
pub async fn listing_names_each_holder(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "listing_names_each_holder").await;
    if let Some(skipped) = skip(&ctx) {
        return skipped;
    }
    let name = ctx.namespace();
    let holder = |label: &str| Holder::new(label).expect("a valid holder label");
    let longest = format!("pod/{}", "x".repeat(MAX_HOLDER_LEN - 4));
    let (first, second, third) = (
        holder("web-1.example:4242"),
        holder(&longest),
        holder("prod/orders-7f9c:1"),
    );
    let with = |label: &Holder, ttl| ctx.options(2, ttl).holder(label.clone());
    let store = ctx.store().await;
    let allocator = |options| {
        workerid_core::Allocator::from_arc(store.clone(), &name, options)
            .expect("valid options make an allocator")
    };
    let a = allocator(with(&first, ctx.long));
    let b = allocator(with(&second, ctx.short));
    let c = allocator(with(&third, ctx.long));
    let mut kept = a.acquire().await.expect("acquire");
    let lapsing = b.acquire().await.expect("acquire");
    let freed = a.acquire().await.expect("acquire");
    a.renew(&mut kept).await.expect("renew");
    a.release(&freed).await.expect("release");

    let listing = store.list(&ns(&name)).await.expect("list");
    let label = |listing: &Listing, id, what| entry(listing, id, what).holder;
    assert_eq!(
        label(&listing, kept.id(), "a renewed lease"),
        first,
        "a renewal keeps the label"
    );
    assert_eq!(
        label(&listing, lapsing.id(), "a live lease"),
        second,
        "a label of {MAX_HOLDER_LEN} bytes comes back whole"
    );
    assert_eq!(
        label(&listing, freed.id(), "a released lease"),
        first,
        "a released ID shows its last holder"
    );

    ctx.let_short_expire().await;
    let listing = store.list(&ns(&name)).await.expect("list");
    assert_eq!(
        label(&listing, lapsing.id(), "an expired lease"),
        second,
        "an expired ID shows its last holder"
    );
    // The pool (0..=2) is full but for the released and the expired ID:
    // both go to the third holder, whose label replaces theirs.
    let again = c.acquire().await.expect("acquire a free ID");
    let more = c.acquire().await.expect("acquire the other free ID");
    let listing = store.list(&ns(&name)).await.expect("list");
    for lease in [&again, &more] {
        assert_eq!(
            label(&listing, lease.id(), "a new grant"),
            third,
            "a new grant replaces the label of the ID's last holder"
        );
    }
    assert_eq!(
        label(&listing, kept.id(), "an untouched lease"),
        first,
        "untouched"
    );
    Outcome::Passed
}

/// A forced release (through another handle) frees a live ID whatever its
/// token, keeping its fence and watermark; the former holder's renew and
/// release answer
/// `NotAssigned`; the next grant's fence is higher and it reads the
/// watermark. Nothing else changes; IDs outside the pool are refused before
/// any I/O; a namespace never used stays unknown.
pub async fn force_release_frees_a_live_id(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "force_release_frees_a_live_id").await;
    if let Some(skipped) = skip(&ctx) {
        return skipped;
    }
    let name = ctx.namespace();
    let a = ctx.allocator(&name, 1, ctx.long).await;
    let b = ctx.allocator(&name, 1, ctx.long).await;
    let mut stuck = a.acquire().await.expect("acquire");
    let mut other = a.acquire().await.expect("acquire the second ID");
    a.renew_with_watermark(&mut stuck, 900)
        .await
        .expect("renew");
    for bad in [2, u64::MAX] {
        expect_err(
            a.force_release(bad).await,
            is::invalid_worker_id,
            &format!("forced release of ID {bad} in a pool of 0..=1"),
        );
    }
    let id = u64::from(stuck.id());
    // Through another handle, as an operator's tool would: the holder's
    // handle learns of it only from the store.
    assert!(
        b.force_release(id).await.expect("force_release"),
        "a live lease is force-released (true)"
    );
    let listing = a.list().await.expect("list");
    assert_eq!(
        entry(&listing, stuck.id(), "a force-released ID"),
        LeaseInfo {
            id: stuck.id(),
            state: LeaseState::Free,
            fence: stuck.fence(),
            watermark: 900,
            holder: a.holder().clone(),
        },
        "a force-released ID is free, its fence and watermark kept"
    );
    assert!(
        entry(&listing, other.id(), "the other ID").state.is_live(),
        "the other lease is untouched"
    );
    expect_err(
        a.renew(&mut stuck).await,
        is::not_assigned,
        "the former holder's renew after a forced release",
    );
    expect_err(
        a.release(&stuck).await,
        is::not_assigned,
        "the former holder's release after a forced release",
    );
    assert!(
        !a.force_release(id).await.expect("force_release"),
        "an ID already free is not released again (false)"
    );

    let mut next = b.acquire().await.expect("the force-released ID is free");
    assert_eq!(next.id(), stuck.id(), "the only free ID");
    assert!(
        next.fence() > stuck.fence(),
        "the next grant's fence must be higher: {} after {}",
        next.fence(),
        stuck.fence()
    );
    assert_eq!(
        next.previous_watermark(),
        900,
        "a forced release keeps the watermark for the next holder"
    );
    assert!(
        b.force_release(id).await.expect("force_release"),
        "the new holder's lease is force-released too"
    );
    expect_err(
        b.renew(&mut next).await,
        is::not_assigned,
        "the second holder's renew after a forced release",
    );
    a.renew(&mut other)
        .await
        .expect("the other holder's renew: its lease was never touched");

    let fresh = ns(&format!("{name}.never"));
    let store = ctx.store().await;
    assert!(
        !store
            .force_release(&fresh, WorkerId::from(0))
            .await
            .expect("force_release in a namespace never used"),
        "nothing to release in a namespace never used (false)"
    );
    assert_eq!(
        store.list(&fresh).await.expect("list"),
        Listing::unknown(),
        "a forced release does not create a namespace"
    );
    Outcome::Passed
}

/// Listing the namespaces shows each one in which an ID was granted, in
/// name order, with the pool size it was created with and how many of its
/// IDs a live lease holds; a released ID is not live. A namespace whose
/// every lease was released or has expired is still listed, with no live
/// lease, expiry judged on the store's clock.
pub async fn namespaces_are_listed(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "namespaces_are_listed").await;
    if let Some(skipped) = skip(&ctx) {
        return skipped;
    }
    let (first, second) = (ctx.namespace(), ctx.namespace());
    let (idle, lapsed) = (ctx.namespace(), ctx.namespace());
    let a = ctx.allocator(&first, 7, ctx.long).await;
    let b = ctx.allocator(&second, 15, ctx.long).await;
    let _held = a.acquire().await.expect("acquire");
    let freed = a.acquire().await.expect("acquire");
    a.release(&freed).await.expect("release");
    let _held_b = b.acquire().await.expect("acquire");
    let _held_b2 = b.acquire().await.expect("acquire");
    // A namespace whose every lease was released, and one whose only lease
    // expired: still listed (their IDs were granted), with none live, the
    // expiry judged on the store's clock when it is listed.
    let c = ctx.allocator(&idle, 3, ctx.long).await;
    let released = c.acquire().await.expect("acquire");
    c.release(&released).await.expect("release");
    let d = ctx.allocator(&lapsed, 1, ctx.short).await;
    let _expiring = d.acquire().await.expect("acquire");
    let store = ctx.store().await;
    let listed = |all: &[NamespaceInfo], name: &str| {
        let names: Vec<&str> = all.iter().map(|n| n.namespace.as_str()).collect();
        all.iter()
            .find(|n| n.namespace.as_str() == name)
            .map(|n| (n.max_worker_id, n.live))
            .unwrap_or_else(|| panic!("namespace {name} is not listed: {names:?}"))
    };
    let all = store.list_namespaces().await.expect("list namespaces");
    assert_eq!(
        listed(&all, &lapsed),
        (1, 1),
        "{lapsed}: a live lease, before it expires"
    );
    ctx.let_short_expire().await;
    let all = store.list_namespaces().await.expect("list namespaces");
    let names: Vec<&str> = all.iter().map(|n| n.namespace.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "namespaces are listed in name order");
    for (name, max, live) in [
        (&first, 7, 1),
        (&second, 15, 2),
        (&idle, 3, 0),
        (&lapsed, 1, 0),
    ] {
        assert_eq!(
            listed(&all, name),
            (max, live),
            "{name}: the pool size it was created with, and its live leases"
        );
    }
    Outcome::Passed
}
