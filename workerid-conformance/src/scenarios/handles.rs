//! One lease through several handles on the store (two processes, or two
//! servers behind a load balancer, each with its own connection).

use workerid_core::{Error, Holder, Token};

use crate::support::{ns, Ctx};
use crate::{Outcome, StoreFactory};

/// A lease is one lease through every handle: renewed through another
/// handle than the one that acquired it, it is still renewed through the
/// first; released through the other, it is released for the first too
/// (`NotAssigned`), and once another token holds the ID, the first handle's
/// renew is `TokenMismatch`. A handle that renews by a record of its own
/// (a lease it made on the server, a cache) must find out what another
/// handle did.
pub async fn a_lease_is_one_lease_through_every_handle(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "a_lease_is_one_lease_through_every_handle").await;
    let (first, other) = (ctx.store().await, ctx.store().await);
    let namespace = ns(&ctx.namespace());
    let holder = Holder::new("conformance:handles").expect("a valid holder");
    let token = Token::generate();
    let granted = first
        .acquire(&namespace, 0, &token, ctx.long, &holder)
        .await
        .expect("acquire in an empty pool of one");
    let id = granted.id;
    other
        .renew(&namespace, id, &token, ctx.long, 0)
        .await
        .expect("a live lease renewed through another handle");
    first
        .renew(&namespace, id, &token, ctx.long, 0)
        .await
        .expect("the lease renewed through another handle is still renewed through the first");
    other
        .release(&namespace, id, &token, 0)
        .await
        .expect("a live lease released through another handle");
    let renewed = first.renew(&namespace, id, &token, ctx.long, 0).await;
    assert!(
        matches!(renewed, Err(Error::NotAssigned { .. })),
        "a lease released through another handle must be released for the first too \
         (NotAssigned), not renewed: {renewed:?}"
    );
    let taker = Token::generate();
    let next = other
        .acquire(&namespace, 0, &taker, ctx.long, &holder)
        .await
        .expect("the released ID is free");
    assert_eq!(next.id, id, "a pool of one");
    let renewed = first.renew(&namespace, id, &token, ctx.long, 0).await;
    assert!(
        matches!(renewed, Err(Error::TokenMismatch { .. })),
        "the ID is another token's now: the first handle's renew must be TokenMismatch, \
         not a second live lease on it: {renewed:?}"
    );
    Outcome::Passed
}
