//! A store that cannot reach its server answers `Unavailable`, never a
//! success or another refusal, and nothing changes.

use std::future::Future;
use std::time::Duration;

use workerid_core::{Allocator, Error, Holder, Token};

use crate::support::{ns, Ctx};
use crate::{Outcome, StoreFactory};

/// How long a call on a store cut off may take to answer: its own request
/// timeout decides, and this bounds it.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// Panics unless `call` answers `Unavailable` within [`ANSWER_WITHIN`].
async fn unavailable<T: std::fmt::Debug>(call: impl Future<Output = Result<T, Error>>, what: &str) {
    match tokio::time::timeout(ANSWER_WITHIN, call).await {
        Ok(Err(Error::Unavailable { .. })) => {}
        Ok(other) => panic!(
            "{what} on a store cut off from its server must answer Unavailable, got {other:?}"
        ),
        Err(_) => panic!(
            "{what} on a store cut off from its server did not answer within {ANSWER_WITHIN:?}"
        ),
    }
}

/// Every operation on a handle whose server is gone answers `Unavailable`
/// (retryable), never a success, `NoAvailableId`, `NotAssigned` or a token
/// error; the store, seen through a working handle, is unchanged: the lease
/// live with its fence, watermark and label, the other ID still free.
/// Skipped when the factory has no such handle
/// ([`StoreFactory::unreachable`]).
pub async fn an_unreachable_store_is_unavailable(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "an_unreachable_store_is_unavailable").await;
    let Some(cut) = f.unreachable().await else {
        return Outcome::Skipped("the store has no server to lose".into());
    };
    let name = ctx.namespace();
    let a = ctx.allocator(&name, 1, ctx.long).await;
    let mut lease = a.acquire().await.expect("acquire in an empty pool");
    let before = ctx.snapshot(&name).await;
    let space = ns(&name);
    let holder = Holder::new("conformance-unreachable").expect("a valid label");
    unavailable(
        cut.acquire(&space, 1, &Token::generate(), ctx.long, &holder),
        "acquire",
    )
    .await;
    unavailable(
        cut.acquire(&space, 1, lease.token(), ctx.long, &holder),
        "acquire sent again with the holder's token",
    )
    .await;
    unavailable(
        cut.renew(&space, lease.id(), lease.token(), ctx.long, u64::MAX),
        "renew",
    )
    .await;
    unavailable(
        cut.renew(&space, lease.id(), &Token::generate(), ctx.long, u64::MAX),
        "renew with another token",
    )
    .await;
    unavailable(
        cut.release(&space, lease.id(), lease.token(), u64::MAX),
        "release",
    )
    .await;
    if ctx.caps.list {
        unavailable(cut.list(&space), "list").await;
        unavailable(cut.force_release(&space, lease.id()), "force_release").await;
        unavailable(cut.list_namespaces(), "list_namespaces").await;
        unavailable(cut.remove_namespace(&space), "remove_namespace").await;
    }
    let through = Allocator::from_arc(cut, &name, ctx.options(1, ctx.long))
        .expect("valid options make an allocator");
    let answer = through.acquire().await;
    assert!(
        matches!(&answer, Err(e) if e.is_retryable()),
        "the allocator on a store cut off answers a retryable error: {answer:?}"
    );
    ctx.assert_unchanged(
        &before,
        ctx.snapshot(&name).await,
        "calls on a handle cut off from the store",
    );
    a.renew(&mut lease)
        .await
        .expect("the lease is still the holder's");
    let other = a.acquire().await.expect("the other ID is still free");
    assert_ne!(other.id(), lease.id());
    Outcome::Passed
}
