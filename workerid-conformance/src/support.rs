//! What the scenarios share: fresh namespaces, allocators, timings.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use workerid_core::{
    Allocator, Capabilities, Error, Lease, LeaseInfo, LeaseOptions, LeaseState, LeaseStore,
    Namespace,
};

use crate::StoreFactory;

/// How many times [`Ctx::until_conclusive`] tries.
pub(crate) const ATTEMPTS: usize = 5;

/// One scenario's view of the store under test.
pub(crate) struct Ctx<'a> {
    pub f: &'a dyn StoreFactory,
    pub caps: Capabilities,
    /// A lease length that expires within a scenario (about 1.5 s, more if the
    /// store's minimum asks for it).
    pub short: Duration,
    /// A lease length that never expires within a scenario.
    pub long: Duration,
    scenario: &'static str,
}

impl<'a> Ctx<'a> {
    pub async fn new(f: &'a dyn StoreFactory, scenario: &'static str) -> Ctx<'a> {
        let caps = f.connect().await.capabilities();
        let short = round_up(
            caps.min_ttl.max(Duration::from_millis(1500)),
            caps.ttl_granularity,
        );
        let long = round_up(
            caps.min_ttl.max(Duration::from_secs(120)),
            caps.ttl_granularity,
        );
        Ctx {
            f,
            caps,
            short,
            long,
            scenario,
        }
    }

    /// A namespace no other scenario or run uses.
    pub fn namespace(&self) -> String {
        let suffix: u64 = rand::rng().random();
        format!("conformance.{}.{suffix:016x}", self.scenario)
    }

    /// An allocator on a new handle, in `namespace`, for `0..=max_worker_id`,
    /// leasing for `ttl`.
    pub async fn allocator(&self, namespace: &str, max_worker_id: u32, ttl: Duration) -> Allocator {
        let options = self.options(max_worker_id, ttl);
        Allocator::from_arc(self.f.connect().await, namespace, options)
            .expect("valid options must make an allocator")
    }

    pub fn options(&self, max_worker_id: u32, ttl: Duration) -> LeaseOptions {
        LeaseOptions::new()
            .max_worker_id(max_worker_id)
            .max_lease_time(self.long)
            .ttl(ttl)
    }

    pub async fn store(&self) -> Arc<dyn LeaseStore> {
        self.f.connect().await
    }

    /// Lets a lease of `short` ttl, granted or renewed before this call, expire
    /// and its ID become free again (the store's declared expiry lag and
    /// quarantine pass too).
    pub async fn let_short_expire(&self) {
        self.f
            .advance(self.short + self.short / 2 + self.reuse_delay(self.short))
            .await;
    }

    /// How long after its end a lease of `ttl` may keep its ID from the next
    /// acquirer: the store's expiry lag, plus one ttl if it quarantines, and
    /// half a ttl more then (a quarantine counts from when the store noticed
    /// the lease gone, which a loaded machine delays).
    pub fn reuse_delay(&self, ttl: Duration) -> Duration {
        let quarantine = if self.caps.quarantine {
            ttl + ttl / 2
        } else {
            Duration::ZERO
        };
        self.caps.expiry_lag + quarantine
    }

    /// Lets the reuse delay of a `short` lease pass (see [`Ctx::reuse_delay`]).
    pub async fn let_reuse_delay_pass(&self) {
        let delay = self.reuse_delay(self.short);
        if !delay.is_zero() {
            self.f.advance(delay).await;
        }
    }

    /// Whether less than `limit` has passed since `since` (always true on
    /// virtual time): a check that a lease is still live is only conclusive
    /// when the answer came back before the lease could have ended, which a
    /// loaded machine does not always manage.
    pub fn within(&self, since: Instant, limit: Duration) -> bool {
        self.f.virtual_time() || since.elapsed() < limit
    }

    /// Checks that `acquirer` is refused (`NoAvailableId`) because a lease of
    /// `short` ttl, granted or renewed at `since`, is still live. False when
    /// the answer came too late to tell (see [`Ctx::within`]).
    ///
    /// # Panics
    /// When the answer came in time and was not `NoAvailableId`.
    pub async fn refused_while_live(
        &self,
        acquirer: &Allocator,
        since: Instant,
        what: &str,
    ) -> bool {
        let seen = acquirer.acquire().await;
        if !self.within(since, self.short) {
            return false;
        }
        expect_err(seen, is::no_available_id, what);
        true
    }

    /// Renews `lease` (of `short` ttl, granted or last renewed at `since`),
    /// which must still be live. False when the answer came too late to tell
    /// (see [`Ctx::within`]): a process stalled past the ttl may rightly be
    /// told `TokenExpired`.
    ///
    /// # Panics
    /// When the answer was an error other than a late `TokenExpired`.
    pub async fn renewed_while_live(
        &self,
        allocator: &Allocator,
        lease: &mut Lease,
        since: Instant,
        what: &str,
    ) -> bool {
        let answer = allocator.renew(lease).await;
        if matches!(answer, Err(Error::TokenExpired { .. })) && !self.within(since, self.short) {
            return false;
        }
        if let Err(e) = answer {
            panic!("{what}: {e:?}");
        }
        true
    }

    /// Runs `attempt` in fresh namespaces until one is conclusive (answers
    /// `true`), at most [`ATTEMPTS`] times.
    ///
    /// # Panics
    /// When no attempt was conclusive: the machine is too slow for the
    /// store's timings, and the suite says so rather than guess.
    pub async fn until_conclusive<F, Fut>(&self, what: &str, mut attempt: F)
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = bool>,
    {
        for _ in 0..ATTEMPTS {
            if attempt(self.namespace()).await {
                return;
            }
            tracing::warn!("{}: an answer came too late to tell; again", self.scenario);
        }
        panic!(
            "{what}: {ATTEMPTS} attempts in a row got their answers too late to tell \
             (the machine is too loaded for a {:?} ttl)",
            self.short
        );
    }

    /// What the store holds for `namespace`, to compare before and after a
    /// call that must change nothing ([`assert_unchanged`]); `None` when the
    /// store cannot list.
    pub async fn snapshot(&self, namespace: &str) -> Option<Vec<LeaseInfo>> {
        if !self.caps.list {
            return None;
        }
        let listing = self
            .store()
            .await
            .list(&ns(namespace))
            .await
            .expect("list a namespace");
        Some(listing.leases)
    }

    /// Panics unless `namespace` holds what `before` saw: the same IDs in
    /// the same states, fences, watermarks and holder labels, and no live
    /// lease extended. `what` names the call that must have changed nothing.
    /// Nothing is checked when the store cannot list.
    #[track_caller]
    pub fn assert_unchanged(
        &self,
        before: &Option<Vec<LeaseInfo>>,
        after: Option<Vec<LeaseInfo>>,
        what: &str,
    ) {
        let (Some(before), Some(after)) = (before, after) else {
            return;
        };
        let ids = |l: &[LeaseInfo]| l.iter().map(|i| i.id).collect::<Vec<_>>();
        assert_eq!(
            ids(before),
            ids(&after),
            "{what} changed which IDs are listed"
        );
        for (was, is) in before.iter().zip(&after) {
            let id = was.id;
            assert_eq!(
                (was.fence, was.watermark, &was.holder),
                (is.fence, is.watermark, &is.holder),
                "{what} changed ID {id}'s fence, watermark or holder label"
            );
            match (was.state, is.state) {
                (LeaseState::Live { remaining: then }, LeaseState::Live { remaining: now }) => {
                    assert!(
                        now <= then,
                        "{what} extended the lease on ID {id}: {then:?} left, then {now:?}"
                    );
                }
                // Time may pass between the two reads: a live lease may end.
                (LeaseState::Live { .. }, LeaseState::Expired) => {}
                (then, now) => assert_eq!(then, now, "{what} changed the state of ID {id}"),
            }
        }
    }

    /// Lets `fraction` of `short` pass.
    pub async fn advance_short(&self, fraction: f64) {
        self.f.advance(self.short.mul_f64(fraction)).await;
    }
}

pub(crate) fn ns(name: &str) -> Namespace {
    Namespace::new(name).expect("the suite makes valid namespaces")
}

pub(crate) fn round_up(ttl: Duration, granularity: Duration) -> Duration {
    let g = granularity.as_nanos().max(1);
    let n = ttl.as_nanos().div_ceil(g) * g;
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

/// Panics unless `result` is the error `expected` describes, naming both
/// the error expected and the answer seen.
#[track_caller]
pub(crate) fn expect_err<T: Debug>(result: Result<T, Error>, expected: is::Expected, what: &str) {
    match result {
        Err(ref e) if (expected.matches)(e) => {}
        other => panic!("{what}: expected {}, got {other:?}", expected.name),
    }
}

/// Matchers for [`expect_err`], named as the scenarios read
/// (`is::token_mismatch`).
#[allow(non_upper_case_globals)]
pub(crate) mod is {
    use workerid_core::Error;

    /// An error variant, by name and by test.
    #[derive(Clone, Copy)]
    pub struct Expected {
        pub name: &'static str,
        pub matches: fn(&Error) -> bool,
    }

    macro_rules! expected {
        ($($matcher:ident: $variant:ident),+ $(,)?) => {$(
            pub const $matcher: Expected = Expected {
                name: concat!("Err(", stringify!($variant), ")"),
                matches: |e| matches!(e, Error::$variant { .. }),
            };
        )+};
    }

    expected! {
        no_available_id: NoAvailableId,
        token_mismatch: TokenMismatch,
        token_expired: TokenExpired,
        not_assigned: NotAssigned,
        invalid_config: InvalidConfig,
        invalid_worker_id: InvalidWorkerId,
        invalid_token: InvalidToken,
    }
}
