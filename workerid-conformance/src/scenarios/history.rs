//! What outlives a lease: the fence and the watermark.

use crate::support::{expect_err, is, Ctx};
use crate::{Outcome, StoreFactory};

/// The fence of an ID rises on every grant: after release, after expiry.
pub async fn fence_rises_on_every_grant(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "fence_rises_on_every_grant").await;
    let ns = ctx.namespace();
    let short = ctx.allocator(&ns, 0, ctx.short).await;
    let long = ctx.allocator(&ns, 0, ctx.long).await;
    let mut fences = Vec::new();
    for _ in 0..3 {
        let lease = long.acquire().await.expect("acquire after a release");
        fences.push(lease.fence());
        long.release(&lease).await.expect("release of a live lease");
    }
    let lease = short.acquire().await.expect("acquire after a release");
    fences.push(lease.fence());
    ctx.let_short_expire().await;
    let lease = long.acquire().await.expect("acquire after an expiry");
    fences.push(lease.fence());
    assert!(
        fences.windows(2).all(|w| w[1] > w[0]),
        "fences of successive grants must rise: {fences:?}"
    );
    Outcome::Passed
}

/// Renewals raise the watermark to the maximum they give (an exact `u64`,
/// also above 2^53); a release other than 0 sets it, the holder's final word,
/// even below what its renewals reserved, while a release of 0 keeps it; the
/// core never lets a release fall below the watermark the lease was granted
/// with. It is handed to the next holder after release and after expiry; an
/// expired holder cannot raise it.
pub async fn watermark_is_handed_over(f: &dyn StoreFactory) -> Outcome {
    const BIG: u64 = (1 << 60) + 1;
    let ctx = Ctx::new(f, "watermark_is_handed_over").await;
    let ns = ctx.namespace();
    let a = ctx.allocator(&ns, 0, ctx.long).await;
    let short = ctx.allocator(&ns, 0, ctx.short).await;

    let mut lease = a.acquire().await.expect("acquire in an empty pool");
    assert_eq!(
        lease.previous_watermark(),
        0,
        "an ID never held has watermark 0"
    );
    a.renew_with_watermark(&mut lease, 100)
        .await
        .expect("renew");
    a.renew_with_watermark(&mut lease, 50).await.expect("renew");
    a.release_with_watermark(&lease, 70).await.expect("release");
    let mut lease = a.acquire().await.expect("acquire after release");
    assert_eq!(
        lease.previous_watermark(),
        70,
        "a release's watermark is its holder's final word, below what its renewals reserved"
    );

    a.renew_with_watermark(&mut lease, BIG)
        .await
        .expect("renew");
    a.renew_with_watermark(&mut lease, BIG - 1)
        .await
        .expect("renew");
    a.release(&lease).await.expect("release");
    let lease = a.acquire().await.expect("acquire after release");
    assert_eq!(
        lease.previous_watermark(),
        BIG,
        "renewals keep the maximum, exactly, as a u64; a release of 0 keeps it"
    );

    a.release_with_watermark(&lease, 5).await.expect("release");
    let mut lease = short.acquire().await.expect("acquire after release");
    assert_eq!(
        lease.previous_watermark(),
        BIG,
        "a release never falls below the watermark its lease was granted with"
    );

    short
        .renew_with_watermark(&mut lease, BIG + 2)
        .await
        .expect("renew");
    ctx.let_short_expire().await;
    expect_err(
        short.renew_with_watermark(&mut lease, u64::MAX).await,
        is::token_expired,
        "renew after expiry",
    );
    let lease = a.acquire().await.expect("acquire after expiry");
    assert_eq!(
        lease.previous_watermark(),
        BIG + 2,
        "handed over through expiry, and not raised by the expired holder"
    );
    Outcome::Passed
}
