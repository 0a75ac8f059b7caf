//! Bad input, namespaces and pool sizes.

use std::time::Duration;

use workerid_core::compat::LibxCompat;
use workerid_core::{Allocator, Error, LeaseOptions, MAX_WORKER_ID_LIMIT};

use crate::support::{expect_err, is, ns, Ctx};
use crate::{Outcome, StoreFactory};

/// Invalid namespaces, options, ttls, IDs and tokens are refused with a typed
/// error, and nothing changes: the holder's lease stays renewable and every
/// other ID of the pool is still free.
pub async fn invalid_input_changes_nothing(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "invalid_input_changes_nothing").await;
    let name = ctx.namespace();
    let a = ctx.allocator(&name, 7, ctx.long).await;
    let mut lease = a.acquire().await.expect("acquire in an empty pool");
    let store = ctx.store().await;

    let too_long = "n".repeat(129);
    for bad in ["", "has space", "a{b}", "a/b", "quote'", too_long.as_str()] {
        expect_err(
            Allocator::from_arc(store.clone(), bad, ctx.options(7, ctx.long)),
            is::invalid_config,
            &format!("namespace {bad:?}"),
        );
    }
    let over_max = ctx.long + ctx.caps.ttl_granularity;
    let bad_options = [
        LeaseOptions::new().worker_bits(0),
        LeaseOptions::new().worker_bits(23),
        LeaseOptions::new().max_worker_id(MAX_WORKER_ID_LIMIT + 1),
        LeaseOptions::new().max_lease_time(Duration::ZERO),
        ctx.options(7, over_max),
        ctx.options(7, Duration::ZERO),
    ];
    for options in bad_options {
        expect_err(
            Allocator::from_arc(store.clone(), &name, options.clone()),
            is::invalid_config,
            &format!("options {options:?}"),
        );
    }
    expect_err(
        a.acquire_with_ttl(Duration::ZERO).await,
        is::invalid_config,
        "ttl 0",
    );
    expect_err(
        a.acquire_with_ttl(over_max).await,
        is::invalid_config,
        "ttl over max_lease_time",
    );
    if ctx.caps.min_ttl > Duration::from_millis(1) {
        let below = ctx.caps.min_ttl - ctx.caps.ttl_granularity.min(ctx.caps.min_ttl / 2);
        expect_err(
            a.acquire_with_ttl(below).await,
            is::invalid_config,
            "ttl below the store's minimum",
        );
    }

    let token = lease.token().to_string();
    for id in [8, u64::from(MAX_WORKER_ID_LIMIT) + 1, u64::MAX] {
        expect_err(
            a.renew_id(id, &token).await,
            is::invalid_worker_id,
            &format!("renew of ID {id}"),
        );
        expect_err(
            a.release_id(id, &token).await,
            is::invalid_worker_id,
            &format!("release of ID {id}"),
        );
    }
    let id = u64::from(lease.id());
    let long_token = format!("{token}A");
    for bad in [
        "",
        "short",
        long_token.as_str(),
        "!!!!!!!!!!!!!!!!!!!!!!",
        "AAAAAAAAAAAAAAAAAAAAA=",
    ] {
        expect_err(
            a.renew_id(id, bad).await,
            is::invalid_token,
            &format!("renew with token {bad:?}"),
        );
        expect_err(
            a.release_id(id, bad).await,
            is::invalid_token,
            &format!("release with token {bad:?}"),
        );
    }

    a.renew(&mut lease)
        .await
        .expect("the holder's renew after refused calls");
    for i in 0..7 {
        a.acquire()
            .await
            .unwrap_or_else(|e| panic!("refused calls must not take IDs: acquire #{}: {e}", i + 2));
    }
    expect_err(
        a.acquire().await,
        is::no_available_id,
        "acquire in a full pool",
    );
    Outcome::Passed
}

/// Namespaces never see each other's leases, even names that differ only in case.
pub async fn namespaces_are_isolated(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "namespaces_are_isolated").await;
    // Names that differ only in case are different namespaces.
    let base = ctx.namespace();
    let (one, two) = (format!("{base}.A"), format!("{base}.a"));
    let a1 = ctx.allocator(&one, 0, ctx.long).await;
    let a2 = ctx.allocator(&two, 0, ctx.long).await;
    let l1 = a1.acquire().await.expect("acquire in the first namespace");
    let l2 = a2
        .acquire()
        .await
        .expect("a full pool in one namespace must not affect another");
    assert_eq!((l1.id().get(), l2.id().get()), (0, 0), "pools of one");
    let store = ctx.store().await;
    expect_err(
        store
            .renew(&ns(&two), l1.id(), l1.token(), ctx.long, 0)
            .await,
        is::token_mismatch,
        "the first namespace's token on the second's ID",
    );
    a1.release(&l1)
        .await
        .expect("release in the first namespace");
    expect_err(
        a2.acquire().await,
        is::no_available_id,
        "a release in one namespace must not free another's ID",
    );
    let a3 = ctx.allocator(&ctx.namespace(), 15, ctx.long).await;
    a3.acquire()
        .await
        .expect("another pool size in another namespace is no mismatch");
    Outcome::Passed
}

/// A namespace remembers the pool size of its first acquire; another size is
/// `ConfigMismatch` naming both, and changes nothing.
pub async fn pool_size_mismatch_is_refused(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "pool_size_mismatch_is_refused").await;
    let ns = ctx.namespace();
    let a7 = ctx.allocator(&ns, 7, ctx.long).await;
    a7.acquire()
        .await
        .expect("first acquire records the pool size");
    let a15 = ctx.allocator(&ns, 15, ctx.long).await;
    for _ in 0..2 {
        match a15.acquire().await {
            Err(
                err @ Error::ConfigMismatch {
                    stored: 7,
                    requested: 15,
                    ..
                },
            ) => {
                let text = err.to_string();
                assert!(
                    text.contains('7') && text.contains("15"),
                    "the message must name both sizes: {text}"
                );
            }
            other => panic!("acquire with max_worker_id 15 in a namespace of 7: got {other:?}"),
        }
    }
    for i in 0..7 {
        a7.acquire().await.unwrap_or_else(|e| {
            panic!("a refused acquire must take no ID: acquire #{}: {e}", i + 2)
        });
    }
    expect_err(
        a7.acquire().await,
        is::no_available_id,
        "acquire in a full pool",
    );
    Outcome::Passed
}
