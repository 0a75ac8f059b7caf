//! What a durable store keeps across a restart.

use crate::support::{expect_err, is, Ctx};
use crate::{Outcome, StoreFactory};

/// A durable store keeps live leases, fences, watermarks and pool sizes across
/// a restart. Skipped (and says so) for a store that declares `durable = false`
/// or a factory that cannot restart its store.
pub async fn survives_restart(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "survives_restart").await;
    if !ctx.caps.durable {
        return Outcome::Skipped(
            "the store declares durable = false: nothing survives a restart".into(),
        );
    }
    if !f.supports_restart() {
        return Outcome::Skipped(
            "this factory cannot restart its store (it is shared); run this scenario with a dedicated server".into(),
        );
    }
    let ns = ctx.namespace();
    let a = ctx.allocator(&ns, 1, ctx.long).await;
    let mut held = a.acquire().await.expect("acquire in an empty pool");
    a.renew_with_watermark(&mut held, 1234)
        .await
        .expect("renew");
    let freed = a.acquire().await.expect("acquire the second ID");
    a.release_with_watermark(&freed, 77).await.expect("release");

    f.restart().await;

    let b = ctx.allocator(&ns, 1, ctx.long).await;
    b.renew(&mut held)
        .await
        .expect("a live lease must survive a restart");
    let again = b
        .acquire()
        .await
        .expect("the released ID is free after a restart");
    assert_eq!(again.id(), freed.id(), "only the released ID is free");
    assert!(
        again.fence() > freed.fence(),
        "the fence must survive a restart"
    );
    assert_eq!(
        again.previous_watermark(),
        77,
        "the watermark must survive a restart"
    );
    expect_err(
        b.acquire().await,
        is::no_available_id,
        "the live lease still holds its ID",
    );
    b.release_with_watermark(&held, 0).await.expect("release");
    let last = b.acquire().await.expect("acquire after release");
    assert_eq!(
        last.previous_watermark(),
        1234,
        "the watermark must survive a restart"
    );
    let other_size = ctx.allocator(&ns, 3, ctx.long).await;
    match other_size.acquire().await {
        Err(workerid_core::Error::ConfigMismatch { stored: 1, .. }) => {}
        other => panic!("the pool size must survive a restart: got {other:?}"),
    }
    Outcome::Passed
}
