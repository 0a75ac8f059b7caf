//! Races between acquirers, renewers and releasers on several handles.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Barrier;
use workerid_core::compat::LibxCompat;
use workerid_core::{Allocator, Error, Lease, Result};

use crate::support::{expect_err, is, Ctx};
use crate::{Outcome, StoreFactory};

/// Separate handles (connections) the racers are spread over.
const HANDLES: usize = 4;

async fn handles(ctx: &Ctx<'_>, ns: &str, max_worker_id: u32) -> Vec<Allocator> {
    let mut all = Vec::with_capacity(HANDLES);
    for _ in 0..HANDLES {
        all.push(ctx.allocator(ns, max_worker_id, ctx.long).await);
    }
    all
}

/// What one racer did: when it started and ended, and its answer.
struct Timed<T> {
    started: Instant,
    finished: Instant,
    result: Result<T>,
}

/// Runs every job in its own task, all released at once by a barrier.
async fn race<T, F, Fut>(jobs: Vec<F>) -> Vec<Timed<T>>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(jobs.len()));
    let tasks: Vec<_> = jobs
        .into_iter()
        .map(|job| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let started = Instant::now();
                let result = job().await;
                Timed {
                    started,
                    finished: Instant::now(),
                    result,
                }
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.expect("a racer panicked"));
    }
    out
}

fn acquire_job(
    a: &Allocator,
) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<Lease>> + Send>> {
    let a = a.clone();
    move || Box::pin(async move { a.acquire().await })
}

/// Splits acquire answers into grants and `NoAvailableId`s; any other answer panics.
fn grants(results: Vec<Timed<Lease>>, what: &str) -> (Vec<Lease>, usize) {
    let mut granted = Vec::new();
    let mut refused = 0;
    for timed in results {
        match timed.result {
            Ok(lease) => granted.push(lease),
            Err(Error::NoAvailableId { .. }) => refused += 1,
            Err(e) => panic!("{what}: an acquirer got {e}"),
        }
    }
    (granted, refused)
}

/// N concurrent acquirers on C free IDs, over several handles, get exactly
/// min(N, C) distinct grants; the others get `NoAvailableId`. Twice: on IDs
/// never granted, then on the same IDs released (the reuse path, which a
/// store may run without its namespace lock), where every grant's fence
/// must also have risen.
pub async fn contention_gives_distinct_grants(f: &dyn StoreFactory) -> Outcome {
    const FREE: u32 = 16;
    const RACERS: usize = 40;
    let ctx = Ctx::new(f, "contention_gives_distinct_grants").await;
    let all = handles(&ctx, &ctx.namespace(), FREE - 1).await;
    let mut previous: Vec<Lease> = Vec::new();
    for round in ["never granted", "released"] {
        for lease in &previous {
            all[0]
                .release(lease)
                .await
                .expect("release of a live lease");
        }
        let results = race(
            (0..RACERS)
                .map(|i| acquire_job(&all[i % HANDLES]))
                .collect(),
        )
        .await;
        let (granted, refused) = grants(results, "racing for 16 IDs");
        let ids: BTreeSet<_> = granted.iter().map(|l| l.id()).collect();
        assert_eq!(
            ids.len(),
            granted.len(),
            "{round} IDs: a live ID was granted twice under contention"
        );
        assert_eq!(
            granted.len(),
            FREE as usize,
            "{round} IDs: {RACERS} racers on {FREE} free IDs must get {FREE} grants"
        );
        assert_eq!(refused, RACERS - FREE as usize);
        for lease in &granted {
            if let Some(before) = previous.iter().find(|p| p.id() == lease.id()) {
                assert!(
                    lease.fence() > before.fence(),
                    "{round} ID {}: fence {} after {}: it must rise on a new grant",
                    lease.id(),
                    lease.fence(),
                    before.fence()
                );
            }
        }
        previous = granted;
    }
    Outcome::Passed
}

/// Racing acquirers on one expired ID: exactly one wins.
pub async fn one_winner_on_an_expired_id(f: &dyn StoreFactory) -> Outcome {
    const RACERS: usize = 16;
    let ctx = Ctx::new(f, "one_winner_on_an_expired_id").await;
    let rounds = if f.virtual_time() { 5 } else { 1 };
    for round in 0..rounds {
        let ns = ctx.namespace();
        let holder = ctx.allocator(&ns, 0, ctx.short).await;
        let old = holder.acquire().await.expect("acquire in an empty pool");
        let all = handles(&ctx, &ns, 0).await;
        // Every racer looks before the expiry (a quarantine counts from then).
        for handle in &all {
            expect_err(
                handle.acquire().await,
                is::no_available_id,
                "acquire in a full pool",
            );
        }
        ctx.let_short_expire().await;
        let results = race(
            (0..RACERS)
                .map(|i| acquire_job(&all[i % HANDLES]))
                .collect(),
        )
        .await;
        let (granted, _) = grants(results, "racing for one expired ID");
        assert_eq!(
            granted.len(),
            1,
            "round {round}: {RACERS} racers on one expired ID: exactly one must win"
        );
        assert!(
            granted[0].fence() > old.fence(),
            "the fence must rise on a new grant"
        );
    }
    Outcome::Passed
}

/// Many renewals of one live lease, at once over several handles, all succeed.
pub async fn concurrent_renewals_all_succeed(f: &dyn StoreFactory) -> Outcome {
    const RENEWERS: usize = 20;
    let ctx = Ctx::new(f, "concurrent_renewals_all_succeed").await;
    let all = handles(&ctx, &ctx.namespace(), 0).await;
    let lease = all[0].acquire().await.expect("acquire in an empty pool");
    let (id, token) = (u64::from(lease.id()), lease.token().to_string());
    let jobs: Vec<_> = (0..RENEWERS)
        .map(|i| {
            let (a, token) = (all[i % HANDLES].clone(), token.clone());
            move || async move { a.renew_id(id, &token).await }
        })
        .collect();
    for (i, timed) in race(jobs).await.into_iter().enumerate() {
        timed
            .result
            .unwrap_or_else(|e| panic!("concurrent renewal #{i} of a live lease: {e}"));
    }
    all[1]
        .release(&lease)
        .await
        .expect("release after the renewals");
    Outcome::Passed
}

/// A release racing renewals and acquires: the release succeeds; no renewal
/// that starts after it succeeds; at most one acquirer wins, and if one
/// started after the release and none won, the store lost the ID.
pub async fn release_races_renew_and_acquire(f: &dyn StoreFactory) -> Outcome {
    const RENEWERS: usize = 4;
    const ACQUIRERS: usize = 4;
    let ctx = Ctx::new(f, "release_races_renew_and_acquire").await;
    for round in 0..5 {
        let all = handles(&ctx, &ctx.namespace(), 0).await;
        let lease = all[0].acquire().await.expect("acquire in an empty pool");
        let (id, token) = (u64::from(lease.id()), lease.token().to_string());

        type Job = Box<
            dyn FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<Option<Lease>>> + Send>>
                + Send,
        >;
        let mut jobs: Vec<Job> = Vec::new();
        let releaser = all[1].clone();
        let held = lease.clone();
        jobs.push(Box::new(move || {
            Box::pin(async move { releaser.release(&held).await.map(|_| None) })
        }));
        for i in 0..RENEWERS {
            let (a, token) = (all[(i + 2) % HANDLES].clone(), token.clone());
            jobs.push(Box::new(move || {
                Box::pin(async move { a.renew_id(id, &token).await.map(|_| None) })
            }));
        }
        for i in 0..ACQUIRERS {
            let a = all[i % HANDLES].clone();
            jobs.push(Box::new(move || {
                Box::pin(async move { a.acquire().await.map(Some) })
            }));
        }
        let mut results = race(jobs).await.into_iter();
        let release = results.next().expect("the release ran");
        if let Err(e) = &release.result {
            panic!("round {round}: the holder's release must succeed while it is live: {e}");
        }
        let released_at = release.finished;
        let mut winners = Vec::new();
        let mut acquire_started_after_release = false;
        for (i, timed) in results.enumerate() {
            let is_renewal = i < RENEWERS;
            match timed.result {
                Ok(Some(lease)) => winners.push(lease),
                Ok(None) => assert!(
                    !is_renewal || timed.started < released_at,
                    "round {round}: a renewal that started after the release succeeded"
                ),
                Err(Error::NotAssigned { .. } | Error::TokenMismatch { .. }) if is_renewal => {}
                Err(Error::NoAvailableId { .. }) if !is_renewal => {
                    acquire_started_after_release |= timed.started > released_at;
                }
                Err(e) => panic!("round {round}: unexpected answer in the race: {e}"),
            }
        }
        assert!(
            winners.len() <= 1,
            "round {round}: {} acquirers won one ID",
            winners.len()
        );
        match winners.pop() {
            Some(mut winner) => {
                expect_err(
                    all[2].renew_id(id, &token).await,
                    is::token_mismatch,
                    "the old token after the race",
                );
                all[3].renew(&mut winner).await.expect("the winner's renew");
            }
            None => {
                assert!(
                    !acquire_started_after_release,
                    "round {round}: an acquire started after the release and found no free ID"
                );
                expect_err(
                    all[2].renew_id(id, &token).await,
                    is::not_assigned,
                    "the old token after the race",
                );
                all[3].acquire().await.expect("the released ID is free");
            }
        }
    }
    Outcome::Passed
}
