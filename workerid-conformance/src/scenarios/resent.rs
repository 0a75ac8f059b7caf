//! An acquire sent again after its answer was lost.

use std::time::Instant;

use workerid_core::{Holder, Token};

use crate::support::{ns, Ctx};
use crate::{Outcome, StoreFactory};

/// An acquire sent again with its token, while the lease it made is live,
/// answers that grant (same ID, same fence, same watermark) and no second
/// one: the lease is extended to store-now + ttl, its holder label as it
/// was, and the pool's other ID is still free. Once the lease has expired,
/// the same token gets a new grant with a higher fence.
pub async fn an_acquire_sent_again_finds_its_grant(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "an_acquire_sent_again_finds_its_grant").await;
    let ctx = &ctx;
    ctx.until_conclusive("an_acquire_sent_again_finds_its_grant", |name| async move {
        let store = ctx.store().await;
        let namespace = ns(&name);
        let token = Token::generate();
        let first_holder = Holder::new("conformance:first-sending").expect("a valid holder");
        let holder = Holder::new("conformance:sent-again").expect("a valid holder");
        let granted = store
            .acquire(&namespace, 1, &token, ctx.short, &first_holder)
            .await
            .expect("acquire in an empty pool");
        ctx.advance_short(0.6).await;
        let resent = Instant::now();
        let again = store
            .acquire(&namespace, 1, &token, ctx.short, &holder)
            .await
            .expect("an acquire sent again while its lease is live");
        assert_eq!(
            again, granted,
            "an acquire sent again with its token must answer its own grant, \
             not make a second one"
        );
        let other = ctx.allocator(&name, 1, ctx.long).await;
        let second = other
            .acquire()
            .await
            .expect("an acquire sent again must leave the pool's other ID free");
        assert_ne!(second.id(), granted.id, "one ID granted to two tokens");
        if ctx.caps.list {
            let listing = store.list(&namespace).await.expect("list");
            let entry = listing
                .leases
                .iter()
                .find(|lease| lease.id == granted.id)
                .expect("the granted ID is listed");
            assert_eq!(
                entry.holder, first_holder,
                "an acquire sent again leaves the holder label as it was"
            );
            assert_eq!(
                entry.fence, granted.fence,
                "an acquire sent again raised the fence"
            );
        }
        ctx.advance_short(0.6).await;
        if !ctx
            .refused_while_live(
                &other,
                resent,
                "a lease whose acquire was sent again 0.6 ttl ago must still be live \
                 (extended to store-now + ttl)",
            )
            .await
        {
            return false;
        }
        ctx.let_short_expire().await;
        let later = store
            .acquire(&namespace, 1, &token, ctx.short, &holder)
            .await
            .expect("acquire once the token's lease has expired");
        assert!(
            later.fence > granted.fence,
            "an expired lease must not be answered again: it is granted anew, \
             with a higher fence (got {later:?} after {granted:?})"
        );
        true
    })
    .await;
    Outcome::Passed
}
