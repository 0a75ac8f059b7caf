//! Renew and release: what each answers in each state of an ID, and expiry.

use std::time::{Duration, Instant};

use workerid_core::compat::LibxCompat;
use workerid_core::Token;

use crate::support::{expect_err, is, ns, Ctx};
use crate::{Outcome, StoreFactory};

/// Renewing a live lease extends it to store-now + ttl.
pub async fn renew_extends_the_lease(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "renew_extends_the_lease").await;
    let ctx = &ctx;
    ctx.until_conclusive("renew_extends_the_lease", |ns| async move {
        let a = ctx.allocator(&ns, 0, ctx.short).await;
        let b = ctx.allocator(&ns, 0, ctx.long).await;
        let mut since = Instant::now();
        let mut lease = a.acquire().await.expect("acquire in an empty pool");
        ctx.advance_short(0.6).await;
        for what in [
            "a lease renewed at 0.6 ttl must still be live at 1.2 ttl",
            "a lease renewed again 0.6 ttl ago must still be live",
        ] {
            let renewed = Instant::now();
            if !ctx
                .renewed_while_live(&a, &mut lease, since, "renew of a live lease")
                .await
            {
                return false;
            }
            since = renewed;
            ctx.advance_short(0.6).await;
            if !ctx.refused_while_live(&b, renewed, what).await {
                return false;
            }
        }
        ctx.let_short_expire().await;
        let next = b
            .acquire()
            .await
            .expect("a lease not renewed for 1.5 ttl must have expired");
        assert!(
            next.fence() > lease.fence(),
            "the fence must rise on a new grant"
        );
        true
    })
    .await;
    Outcome::Passed
}

/// Renew and release with another token answer `TokenMismatch` and change
/// nothing: the lease stays live, is not extended, and its watermark is
/// neither raised nor set. Checked right after each refused call (where the
/// store can list), and at the end through the watermark the next holder
/// reads (where it cannot).
pub async fn wrong_token_changes_nothing(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "wrong_token_changes_nothing").await;
    let name = ctx.namespace();
    let a = ctx.allocator(&name, 0, ctx.long).await;
    let b = ctx.allocator(&name, 0, ctx.long).await;
    let mut lease = a.acquire().await.expect("acquire in an empty pool");
    a.renew_with_watermark(&mut lease, 3)
        .await
        .expect("the holder's renew with a watermark");
    // Time passes before the refused calls, so an extension shows in the
    // time left (etcd counts it in whole seconds).
    ctx.f
        .advance(ctx.caps.ttl_granularity.max(Duration::from_millis(20)))
        .await;
    let id = u64::from(lease.id());
    let wrong = Token::generate();
    // Tokens compare byte for byte: the holder's token in another case is
    // another token. One letter of the first 21 characters changes case
    // (the last one carries padding bits, so it must stay as it is).
    let text = lease.token().to_string();
    let recased: String = match text[..21].find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text
            .char_indices()
            .map(|(i, c)| {
                if i != at {
                    c
                } else if c.is_ascii_uppercase() {
                    c.to_ascii_lowercase()
                } else {
                    c.to_ascii_uppercase()
                }
            })
            .collect(),
        None => text.clone(),
    };
    let store = ctx.store().await;
    let space = ns(&name);
    let before = ctx.snapshot(&name).await;
    for other in [wrong.to_string(), recased].iter().filter(|t| **t != text) {
        let other_token: Token = other.parse().expect("a well-formed token");
        expect_err(
            a.renew_id(id, other).await,
            is::token_mismatch,
            "renew with another token",
        );
        ctx.assert_unchanged(
            &before,
            ctx.snapshot(&name).await,
            "a renew with another token",
        );
        expect_err(
            store
                .renew(&space, lease.id(), &other_token, ctx.long, u64::MAX)
                .await,
            is::token_mismatch,
            "renew with another token and a watermark",
        );
        ctx.assert_unchanged(
            &before,
            ctx.snapshot(&name).await,
            "a renew with another token and a watermark",
        );
        expect_err(
            store
                .release(&space, lease.id(), &other_token, u64::MAX)
                .await,
            is::token_mismatch,
            "release with another token and a watermark",
        );
        ctx.assert_unchanged(
            &before,
            ctx.snapshot(&name).await,
            "a release with another token and a watermark",
        );
        expect_err(
            a.release_id(id, other).await,
            is::token_mismatch,
            "release with another token",
        );
        ctx.assert_unchanged(
            &before,
            ctx.snapshot(&name).await,
            "a release with another token",
        );
        expect_err(
            b.acquire().await,
            is::no_available_id,
            "a release with another token must not free the ID",
        );
    }
    a.renew(&mut lease)
        .await
        .expect("the holder's renew after wrong-token calls");
    // A release of watermark 0 keeps the stored one: what the refused calls
    // left is what the next holder reads.
    a.release_with_watermark(&lease, 0)
        .await
        .expect("the holder's release");
    let next = b
        .acquire()
        .await
        .expect("acquire after the holder released");
    assert_eq!(
        next.previous_watermark(),
        3,
        "the next holder must read the watermark 3 its holder left: a renew or release \
         with another token must not raise or set it, and the holder's release of \
         watermark 0 must keep it"
    );
    Outcome::Passed
}

/// An ID never granted, or released, is `NotAssigned` for renew and release,
/// whatever the token.
pub async fn unassigned_ids_are_not_assigned(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "unassigned_ids_are_not_assigned").await;
    let name = ctx.namespace();
    let store = ctx.store().await;
    let token = Token::generate();
    let fresh = ns(&name);
    expect_err(
        store.renew(&fresh, 0.into(), &token, ctx.long, 0).await,
        is::not_assigned,
        "renew in a namespace never used",
    );
    expect_err(
        store.release(&fresh, 0.into(), &token, 0).await,
        is::not_assigned,
        "release in a namespace never used",
    );
    let a = ctx.allocator(&name, 7, ctx.long).await;
    let mut lease = a.acquire().await.expect("acquire in an empty pool");
    let other = (u64::from(lease.id()) + 1) % 8;
    let text = lease.token().to_string();
    expect_err(
        a.renew_id(other, &text).await,
        is::not_assigned,
        "renew of an ID never granted",
    );
    expect_err(
        a.release_id(other, &text).await,
        is::not_assigned,
        "release of an ID never granted",
    );
    a.release_with_watermark(&lease, 3)
        .await
        .expect("release of a live lease");
    let space = ns(&name);
    let before = ctx.snapshot(&name).await;
    expect_err(
        a.renew(&mut lease).await,
        is::not_assigned,
        "renew after release",
    );
    expect_err(
        store
            .renew(&space, lease.id(), lease.token(), ctx.long, u64::MAX)
            .await,
        is::not_assigned,
        "renew with a watermark after release",
    );
    ctx.assert_unchanged(&before, ctx.snapshot(&name).await, "a renew after release");
    expect_err(a.release(&lease).await, is::not_assigned, "second release");
    expect_err(
        store
            .release(&space, lease.id(), lease.token(), u64::MAX)
            .await,
        is::not_assigned,
        "second release with a watermark",
    );
    ctx.assert_unchanged(&before, ctx.snapshot(&name).await, "a second release");
    let stranger = Token::generate().to_string();
    let id = u64::from(lease.id());
    expect_err(
        a.renew_id(id, &stranger).await,
        is::not_assigned,
        "renew of a released ID with another token",
    );
    expect_err(
        a.release_id(id, &stranger).await,
        is::not_assigned,
        "release of a released ID with another token",
    );
    Outcome::Passed
}

/// Renew and release of an expired lease (not granted again) answer
/// `TokenExpired`, and another token's `TokenMismatch`; the renew does not
/// revive it, a forced release leaves it as it is (`false`, where the store
/// has one), and the ID is free. Once it is granted again, the old token gets
/// `TokenMismatch`.
pub async fn expired_lease_is_token_expired(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "expired_lease_is_token_expired").await;
    let ns = ctx.namespace();
    let a = ctx.allocator(&ns, 0, ctx.short).await;
    let b = ctx.allocator(&ns, 0, ctx.long).await;
    let mut lease = a.acquire().await.expect("acquire in an empty pool");
    expect_err(
        b.acquire().await,
        is::no_available_id,
        "acquire while the only ID is live",
    );
    ctx.let_short_expire().await;
    let id = u64::from(lease.id());
    expect_err(
        a.renew_id(id, &Token::generate().to_string()).await,
        is::token_mismatch,
        "renew of an expired lease with another token",
    );
    if ctx.caps.list {
        assert!(
            !b.force_release(id).await.expect("force_release"),
            "a forced release leaves an expired ID as it is (false)"
        );
    }
    let before = ctx.snapshot(&ns).await;
    let store = ctx.store().await;
    let space = crate::support::ns(&ns);
    expect_err(
        store
            .renew(&space, lease.id(), lease.token(), ctx.long, u64::MAX)
            .await,
        is::token_expired,
        "renew with a watermark after expiry",
    );
    ctx.assert_unchanged(&before, ctx.snapshot(&ns).await, "a renew after expiry");
    expect_err(
        a.renew(&mut lease).await,
        is::token_expired,
        "renew after expiry",
    );
    expect_err(
        store
            .release(&space, lease.id(), lease.token(), u64::MAX)
            .await,
        is::token_expired,
        "release with a watermark after expiry",
    );
    ctx.assert_unchanged(&before, ctx.snapshot(&ns).await, "a release after expiry");
    expect_err(
        a.release(&lease).await,
        is::token_expired,
        "release after expiry",
    );
    let mut next = b
        .acquire()
        .await
        .expect("an expired ID must be free after TokenExpired answers");
    assert!(
        next.fence() > lease.fence(),
        "the fence must rise on a new grant"
    );
    assert_eq!(
        next.previous_watermark(),
        0,
        "a renew or release answered TokenExpired must not change the watermark"
    );
    expect_err(
        a.renew(&mut lease).await,
        is::token_mismatch,
        "renew of a lease granted to another",
    );
    expect_err(
        a.release(&lease).await,
        is::token_mismatch,
        "release of a lease granted to another",
    );
    b.renew(&mut next).await.expect("the new holder's renew");
    Outcome::Passed
}

/// Release frees the ID at once; the old token then gets `NotAssigned`, and
/// `TokenMismatch` once the ID is granted again.
pub async fn release_frees_at_once(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "release_frees_at_once").await;
    let ns = ctx.namespace();
    let a = ctx.allocator(&ns, 0, ctx.long).await;
    let b = ctx.allocator(&ns, 0, ctx.long).await;
    let mut lease = a.acquire().await.expect("acquire in an empty pool");
    a.release(&lease).await.expect("release of a live lease");
    let next = b.acquire().await.expect("acquire right after a release");
    assert_eq!(next.id(), lease.id(), "a pool of one");
    assert!(
        next.fence() > lease.fence(),
        "the fence must rise on a new grant"
    );
    expect_err(
        a.renew(&mut lease).await,
        is::token_mismatch,
        "old token after the ID was granted again",
    );
    expect_err(
        a.release(&lease).await,
        is::token_mismatch,
        "old token release after the ID was granted again",
    );
    Outcome::Passed
}

/// An expired ID is granted to the next acquirer; the old holder is refused.
pub async fn expired_id_is_reclaimed(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "expired_id_is_reclaimed").await;
    let ns = ctx.namespace();
    let a = ctx.allocator(&ns, 0, ctx.short).await;
    let b = ctx.allocator(&ns, 0, ctx.long).await;
    let mut old = a.acquire().await.expect("acquire in an empty pool");
    expect_err(
        b.acquire().await,
        is::no_available_id,
        "acquire while the only ID is live",
    );
    ctx.let_short_expire().await;
    let mut new = b
        .acquire()
        .await
        .expect("acquire after the only lease expired");
    assert_eq!(new.id(), old.id(), "a pool of one");
    assert!(
        new.fence() > old.fence(),
        "the fence must rise on a new grant"
    );
    expect_err(
        a.renew(&mut old).await,
        is::token_mismatch,
        "the old holder's renew",
    );
    expect_err(
        a.release(&old).await,
        is::token_mismatch,
        "the old holder's release",
    );
    b.renew(&mut new)
        .await
        .expect("the new holder's renew after the old one's attempts");
    Outcome::Passed
}

/// Expiry is kept to the millisecond: a lease is live while the store's
/// clock is before its end and free from its end on (plus the store's
/// declared expiry lag and quarantine). On virtual time it is checked 1 ms
/// before the end and at the end; on real time, where answers take time, at
/// 0.9 and 1.2 of the ttl. A store that rounds to whole seconds, or frees a
/// lease early (its holder stops only a 1 % drift margin before the end),
/// fails.
pub async fn expiry_has_millisecond_precision(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "expiry_has_millisecond_precision").await;
    let ctx = &ctx;
    let exact = f.virtual_time();
    let ms = Duration::from_millis(1);
    ctx.until_conclusive("expiry_has_millisecond_precision", |ns| async move {
        let a = ctx.allocator(&ns, 0, ctx.short).await;
        let b = ctx.allocator(&ns, 0, ctx.long).await;
        let sent = Instant::now();
        a.acquire().await.expect("acquire in an empty pool");
        let (live_at, free_at) = if exact {
            (ctx.short - ms, ctx.short)
        } else {
            (ctx.short.mul_f64(0.9), ctx.short.mul_f64(1.2))
        };
        f.advance(live_at).await;
        let what = format!(
            "a {:?} lease must be live {:?} after its grant (a store that frees it early \
             lets two holders share the ID)",
            ctx.short, live_at
        );
        if !ctx.refused_while_live(&b, sent, &what).await {
            return false;
        }
        f.advance(free_at - live_at).await;
        ctx.let_reuse_delay_pass().await;
        b.acquire().await.unwrap_or_else(|e| {
            panic!(
                "a {:?} lease must have expired {:?} after its grant, plus {:?} of declared \
                 expiry lag and quarantine: {e}",
                ctx.short,
                free_at,
                ctx.reuse_delay(ctx.short)
            )
        });
        true
    })
    .await;
    Outcome::Passed
}

/// A store that declares [`Capabilities::quarantine`](workerid_core::Capabilities)
/// keeps an expired ID (one not released) from every acquirer until one more
/// of its ttl has passed, and grants it after that; a released ID is free at
/// once. Skipped for stores that do not declare it.
pub async fn expired_ids_are_quarantined(f: &dyn StoreFactory) -> Outcome {
    let ctx = Ctx::new(f, "expired_ids_are_quarantined").await;
    if !ctx.caps.quarantine {
        return Outcome::Skipped("the store does not quarantine expired IDs".into());
    }
    // A ttl long enough that "expired" (ttl + lag) and "quarantine over"
    // (2 ttl) are seconds apart.
    let ttl = crate::support::round_up(
        (ctx.short * 3).max(ctx.caps.expiry_lag * 4),
        ctx.caps.ttl_granularity,
    );
    let lag = ctx.caps.expiry_lag;
    let ns = ctx.namespace();
    let a = ctx.allocator(&ns, 1, ttl).await;
    let b = ctx.allocator(&ns, 1, ctx.long).await;
    let expiring = a.acquire().await.expect("acquire in an empty pool");
    let released = a.acquire().await.expect("acquire of the second ID");
    // The quarantine counts from when an acquirer saw the ID go: b looks now.
    expect_err(
        b.acquire().await,
        is::no_available_id,
        "acquire in a full pool",
    );
    a.release(&released).await.expect("release of a live lease");
    // Halfway between the lease's end (plus lag) and the quarantine's end.
    ctx.f.advance(ttl + lag + (ttl - lag) / 2).await;
    let next = b
        .acquire()
        .await
        .expect("a released ID must be free at once");
    assert_eq!(next.id(), released.id(), "the released ID is the free one");
    expect_err(
        b.acquire().await,
        is::no_available_id,
        "an expired ID must stay quarantined for one more ttl",
    );
    ctx.f.advance(ttl / 2 + ttl / 2).await;
    let after = b
        .acquire()
        .await
        .expect("an expired ID must be granted once its quarantine is over");
    assert_eq!(after.id(), expiring.id());
    Outcome::Passed
}
