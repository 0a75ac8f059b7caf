//! # workerid-conformance
//!
//! The store contract (`docs/contract.md`, the documentation of `LeaseStore`) turned into tests: scenarios that every [`LeaseStore`](workerid_core::LeaseStore), built-in
//! or third-party, must pass. Like object_store's `integration.rs`, each
//! scenario is a plain `pub async fn` (in [`scenarios`]) that panics on a
//! broken rule; a store crate runs them all, as separate filterable tests, with
//! one macro:
//!
//! ```
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use workerid_conformance::StoreFactory;
//! use workerid_core::LeaseStore;
//! use workerid_memory::MemoryStore;
//!
//! struct Factory(MemoryStore);
//!
//! #[async_trait]
//! impl StoreFactory for Factory {
//!     async fn connect(&self) -> Arc<dyn LeaseStore> {
//!         Arc::new(self.0.clone())
//!     }
//! }
//!
//! // In tests/conformance.rs: one #[test] per scenario, named
//! // `conformance::<scenario>`, so `cargo test expiry` runs a few.
//! workerid_conformance::lease_store_tests!(Factory(MemoryStore::new()));
//! # fn main() {}
//! ```
//!
//! Or all of them in one call, with a report: [`run_all`].
//!
//! Timings adapt to the store's declared [`Capabilities`](workerid_core::Capabilities)
//! (minimum ttl, granularity); a scenario a capability excuses returns
//! [`Outcome::Skipped`] and says why. The suite has teeth: its own tests run it
//! against deliberately broken stores and check that each one fails.
#![deny(missing_docs)]

/// Defines a `static` list of scenarios from the names of their `pub async
/// fn`s, each taking `&$factory`.
#[doc(hidden)]
#[macro_export]
macro_rules! __registry {
    ($(#[$doc:meta])* $list:ident: $factory:ty; $($name:ident),+ $(,)?) => {
        $(#[$doc])*
        pub static $list: &[$crate::Scenario<$factory>] = &[$(
            $crate::Scenario {
                name: stringify!($name),
                run: {
                    fn run(f: &$factory) -> $crate::ScenarioFuture<'_> {
                        Box::pin($name(f))
                    }
                    run
                },
            }
        ),+];
    };
}

mod factory;
pub mod scenarios;
pub mod secrets;
pub mod segments;
mod support;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures::FutureExt;
#[doc(hidden)]
pub use workerid_core;

pub use factory::StoreFactory;
pub use segments::SegmentFactory;

/// How a scenario ended when it did not panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// Not run, for the reason given (a capability the store does not declare).
    Skipped(String),
}

/// A scenario's future.
pub type ScenarioFuture<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// One named scenario: of the lease suite ([`scenarios`]) by default, or of
/// the segment suite ([`SegmentScenario`]).
pub struct Scenario<F: ?Sized + 'static = dyn StoreFactory> {
    /// Its name (the function's name).
    pub name: &'static str,
    /// Runs it.
    pub run: for<'a> fn(&'a F) -> ScenarioFuture<'a>,
}

/// One named scenario of the segment suite ([`segments`]).
pub type SegmentScenario = Scenario<dyn SegmentFactory>;

impl<F: ?Sized> Clone for Scenario<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: ?Sized> Copy for Scenario<F> {}

impl<F: ?Sized> std::fmt::Debug for Scenario<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The result of [`run_all`]: each scenario's outcome, or its panic message.
#[derive(Debug, Default)]
pub struct Report {
    /// `(scenario, outcome or failure message)`, in run order.
    pub results: Vec<(&'static str, Result<Outcome, String>)>,
}

impl Report {
    /// The scenarios that failed.
    pub fn failed(&self) -> Vec<&'static str> {
        self.results
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(name, _)| *name)
            .collect()
    }

    /// The scenarios that were skipped.
    pub fn skipped(&self) -> Vec<&'static str> {
        self.results
            .iter()
            .filter(|(_, r)| matches!(r, Ok(Outcome::Skipped(_))))
            .map(|(name, _)| *name)
            .collect()
    }

    /// Panics, listing every failure, unless all scenarios passed or were skipped.
    #[track_caller]
    pub fn assert_passed(&self) {
        let failures: Vec<String> = self
            .results
            .iter()
            .filter_map(|(name, r)| r.as_ref().err().map(|msg| format!("{name}: {msg}")))
            .collect();
        assert!(
            failures.is_empty(),
            "{} conformance scenario(s) failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// Runs one scenario, turning a panic into `Err(message)`.
pub async fn run_scenario<F: ?Sized>(
    scenario: &Scenario<F>,
    factory: &F,
) -> Result<Outcome, String> {
    match AssertUnwindSafe((scenario.run)(factory))
        .catch_unwind()
        .await
    {
        Ok(outcome) => Ok(outcome),
        Err(panic) => Err(panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".to_string())),
    }
}

async fn run_list<F: ?Sized>(list: &[Scenario<F>], factory: &F) -> Report {
    let mut report = Report::default();
    // A contending child process runs the one scenario that spawned it.
    let child = in_contending_process();
    for scenario in list {
        if child && scenario.name != "contention_across_processes" {
            continue;
        }
        let result = run_scenario(scenario, factory).await;
        report.results.push((scenario.name, result));
    }
    report
}

/// Runs every scenario one after the other and reports each outcome. (The
/// factory's type owns its state: `'static`.)
///
/// ```no_run
/// # async fn demo(factory: impl workerid_conformance::StoreFactory + 'static) {
/// workerid_conformance::run_all(&factory).await.assert_passed();
/// # }
/// ```
pub async fn run_all(factory: &(dyn StoreFactory + 'static)) -> Report {
    run_list(scenarios::ALL, factory).await
}

/// Runs every segment scenario one after the other and reports each outcome.
pub async fn run_all_segments(factory: &(dyn SegmentFactory + 'static)) -> Report {
    run_list(segments::SEGMENT_SCENARIOS, factory).await
}

/// Whether this process is a contender that
/// [`contention_across_processes`](scenarios::contention_across_processes)
/// started: the test it runs makes its factory as usual and runs the
/// scenario, which contends and reports to its parent instead of judging.
/// A test that expects the scenario to fail (a broken store) expects it
/// only when this is false.
pub fn in_contending_process() -> bool {
    std::env::var_os(scenarios::CONTENDER_ENV).is_some()
}

/// The names of all scenarios, in run order.
pub fn scenario_names() -> Vec<&'static str> {
    scenarios::ALL.iter().map(|s| s.name).collect()
}

/// Runs the scenario called `name` in a fresh multi-threaded Tokio runtime,
/// with the factory `make_factory` builds inside it. Used by
/// [`lease_store_tests!`]; panics when the scenario fails, and prints the
/// reason when it is skipped.
pub fn run_named<F, Fut>(name: &str, make_factory: F)
where
    F: FnOnce() -> Fut,
    Fut: Future,
    Fut::Output: StoreFactory + 'static,
{
    let scenario = find(scenarios::ALL, name);
    in_runtime(name, async {
        let factory = make_factory().await;
        (scenario.run)(&factory).await
    });
}

/// Like [`run_named`], for the segment scenarios ([`segment_store_tests!`]).
pub fn run_named_segment<F, Fut>(name: &str, make_factory: F)
where
    F: FnOnce() -> Fut,
    Fut: Future,
    Fut::Output: SegmentFactory + 'static,
{
    let scenario = find(segments::SEGMENT_SCENARIOS, name);
    in_runtime(name, async {
        let factory = make_factory().await;
        (scenario.run)(&factory).await
    });
}

fn find<F: ?Sized>(list: &'static [Scenario<F>], name: &str) -> &'static Scenario<F> {
    list.iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no conformance scenario is called {name:?}"))
}

fn in_runtime(name: &str, scenario: impl Future<Output = Outcome>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    if let Outcome::Skipped(reason) = runtime.block_on(scenario) {
        // Written to the real stderr, past the test harness's capture: a
        // skip must say so where it is seen, even when the test passes.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED {name}: {reason}");
    }
}

/// Expands to a module `segment_conformance` with one `#[test]` per segment
/// scenario; the argument makes a [`SegmentFactory`] (it may `.await`).
#[macro_export]
macro_rules! segment_store_tests {
    ($factory:expr) => {
        $crate::__segment_scenarios!(segment_store_tests! { @tests ($factory) });
    };
    (@tests ($factory:expr) $($name:ident),+ $(,)?) => {
        #[allow(missing_docs)]
        mod segment_conformance {
            #[allow(unused_imports)]
            use super::*;

            /// The scenarios this module runs.
            pub const SCENARIO_NAMES: &[&str] = &[$(stringify!($name)),+];

            $(
                #[test]
                fn $name() {
                    $crate::run_named_segment(stringify!($name), || async { $factory });
                }
            )+
        }
    };
}

/// Expands to a module `conformance` with one `#[test]` per scenario.
///
/// The argument is an expression that makes a [`StoreFactory`]; it is
/// evaluated inside each test's Tokio runtime, in an `async` block, so it may
/// `.await`. Tests are named `conformance::<scenario>`.
///
/// ```
/// # use std::sync::Arc;
/// # use async_trait::async_trait;
/// # use workerid_core::LeaseStore;
/// # struct MyFactory;
/// # #[async_trait]
/// # impl workerid_conformance::StoreFactory for MyFactory {
/// #     async fn connect(&self) -> Arc<dyn LeaseStore> {
/// #         Arc::new(workerid_memory::MemoryStore::new())
/// #     }
/// # }
/// # impl MyFactory { async fn start() -> Self { MyFactory } }
/// workerid_conformance::lease_store_tests!(MyFactory::start().await);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! lease_store_tests {
    ($factory:expr) => {
        $crate::__lease_scenarios!(lease_store_tests! { @tests ($factory) });
    };
    (@tests ($factory:expr) $($name:ident),+ $(,)?) => {
        #[allow(missing_docs)]
        mod conformance {
            #[allow(unused_imports)]
            use super::*;

            /// The scenarios this module runs.
            pub const SCENARIO_NAMES: &[&str] = &[$(stringify!($name)),+];

            $(
                #[test]
                fn $name() {
                    $crate::run_named(stringify!($name), || async { $factory });
                }
            )+
        }
    };
}
