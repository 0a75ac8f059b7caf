//! Acquire: distinct grants, exhaustion, tokens, pool sizes.

use std::collections::BTreeSet;

use workerid_core::compat::LibxCompat;
use workerid_core::Token;

use crate::support::{expect_err, is, Ctx};
use crate::{Outcome, StoreFactory};

/// Acquire grants distinct IDs of the pool, each with a fence, until every ID
/// is held; then `NoAvailableId`, from any handle.
pub async fn grants_distinct_ids_until_exhausted(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "grants_distinct_ids_until_exhausted").await;
    let ns = ctx.namespace();
    let a = ctx.allocator(&ns, 7, ctx.long).await;
    let mut ids = BTreeSet::new();
    for i in 0..8 {
        let lease = a
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("acquire #{} in a pool of 8 with free IDs: {e}", i + 1));
        assert!(
            lease.id().get() <= 7,
            "granted ID {} outside 0..=7",
            lease.id()
        );
        assert!(lease.fence() >= 1, "a grant's fence must be at least 1");
        assert!(
            ids.insert(lease.id()),
            "ID {} granted twice while live",
            lease.id()
        );
    }
    expect_err(
        a.acquire().await,
        is::no_available_id,
        "acquire in a full pool",
    );
    let b = ctx.allocator(&ns, 7, ctx.long).await;
    expect_err(
        b.acquire().await,
        is::no_available_id,
        "acquire in a full pool through another handle",
    );
    Outcome::Passed
}

/// The token of a grant is 22 URL-safe base64 characters, and is what renew
/// and release accept.
pub async fn tokens_are_22_url_safe_characters(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "tokens_are_22_url_safe_characters").await;
    let a = ctx.allocator(&ctx.namespace(), 3, ctx.long).await;
    let (id, token) = a.get_id().await.expect("get_id in an empty pool");
    let (_, other) = a.get_id().await.expect("get_id in a pool with free IDs");
    assert_ne!(token, other, "two grants got the same token");
    for t in [&token, &other] {
        assert_eq!(t.len(), 22, "token {t:?} is not 22 characters");
        assert!(
            t.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "token {t:?} is not URL-safe base64"
        );
        Token::parse(t).expect("a granted token parses");
    }
    a.renew_id(u64::from(id), &token)
        .await
        .expect("renew with the token from get_id");
    a.release_id(u64::from(id), &token)
        .await
        .expect("release with the token from get_id");
    Outcome::Passed
}

/// A pool of one ID (`max_worker_id = 0`) and the largest pool the store
/// declares both work, without filling the store with every ID.
pub async fn smallest_and_largest_pools(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "smallest_and_largest_pools").await;
    let one = ctx.allocator(&ctx.namespace(), 0, ctx.long).await;
    let lease = one.acquire().await.expect("acquire in a pool of one");
    assert_eq!(lease.id().get(), 0, "a pool of one holds only ID 0");
    expect_err(
        one.acquire().await,
        is::no_available_id,
        "second acquire in a pool of one",
    );

    let bits = ctx.caps.max_worker_bits.min(workerid_core::MAX_WORKER_BITS);
    let max = (1u32 << bits) - 1;
    let big = ctx.allocator(&ctx.namespace(), max, ctx.long).await;
    let mut ids = BTreeSet::new();
    let mut leases = Vec::new();
    for _ in 0..3 {
        let lease = big
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("acquire in a pool of 2^{bits}: {e}"));
        assert!(
            lease.id().get() <= max,
            "ID {} outside 0..={max}",
            lease.id()
        );
        assert!(ids.insert(lease.id()), "ID {} granted twice", lease.id());
        leases.push(lease);
    }
    for lease in &leases {
        big.release(lease).await.expect("release in the large pool");
    }
    Outcome::Passed
}
