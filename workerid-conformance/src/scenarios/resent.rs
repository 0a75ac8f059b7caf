//! An acquire sent again after its answer was lost.

use std::time::Instant;

use workerid_core::{Holder, Namespace, Token};

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

/// Two acquires with one token that overlap in the store (the first still
/// running when its client, having given up on it, sent it again through
/// another handle) make one grant, never two: 50 pairs in namespaces never
/// used, and 50 in namespaces whose IDs have expired (each way an acquire
/// takes an ID).
pub async fn overlapping_acquires_with_one_token_make_one_grant(f: &dyn StoreFactory) -> Outcome {
    const PAIRS: usize = 50;
    let ctx = Ctx::new(f, "overlapping_acquires_with_one_token_make_one_grant").await;
    let (first, second) = (ctx.store().await, ctx.store().await);
    let holder = Holder::new("conformance:overlap").expect("a valid holder");
    let fresh: Vec<Namespace> = (0..PAIRS).map(|_| ns(&ctx.namespace())).collect();
    let expired: Vec<Namespace> = (0..PAIRS).map(|_| ns(&ctx.namespace())).collect();
    for namespace in &expired {
        for _ in 0..2 {
            first
                .acquire(namespace, 3, &Token::generate(), ctx.short, &holder)
                .await
                .expect("a lease to let expire");
        }
    }
    ctx.let_short_expire().await;
    for (round, namespace) in fresh.iter().chain(&expired).enumerate() {
        let token = Token::generate();
        let (a, b) = tokio::join!(
            first.acquire(namespace, 3, &token, ctx.long, &holder),
            second.acquire(namespace, 3, &token, ctx.long, &holder),
        );
        let (a, b) = (a.expect("acquire"), b.expect("acquire sent again"));
        assert_eq!(
            a.id, b.id,
            "pair {round}: one token was granted two worker IDs by overlapping acquires \
             ({a:?}, {b:?}): the second must find the first's grant"
        );
    }
    Outcome::Passed
}
