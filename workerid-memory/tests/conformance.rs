//! The whole conformance suite on the memory store: once on a manual clock
//! (virtual time, no sleeping) as separate tests, once on the real clock.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use workerid_conformance::StoreFactory;
use workerid_core::LeaseStore;
use workerid_memory::{ManualClock, MemoryStore};

/// Handles share one store; time moves only when the suite says so.
struct VirtualTime {
    clock: Arc<ManualClock>,
    store: MemoryStore,
}

impl VirtualTime {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new());
        VirtualTime {
            store: MemoryStore::with_clock(clock.clone()),
            clock,
        }
    }
}

#[async_trait]
impl StoreFactory for VirtualTime {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        // Through Box<dyn> too: the forwarding impls must not lose a method.
        Arc::new(Box::new(self.store.clone()) as Box<dyn LeaseStore>)
    }
    async fn advance(&self, duration: Duration) {
        self.clock.advance(duration);
    }
    fn virtual_time(&self) -> bool {
        true
    }
}

workerid_conformance::lease_store_tests!(VirtualTime::new());

/// The real monotonic clock: expiry scenarios sleep.
struct RealTime(MemoryStore);

#[async_trait]
impl StoreFactory for RealTime {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.0.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_suite_on_the_real_clock() {
    let report = workerid_conformance::run_all(&RealTime(MemoryStore::new())).await;
    report.assert_passed();
    assert_eq!(
        report.skipped(),
        [
            "expired_ids_are_quarantined",
            "contention_across_processes",
            "an_unreachable_store_is_unavailable",
            "survives_restart"
        ],
        "only what an in-process store cannot have are excused: durability, other processes, \
         a server to lose (and a quarantine it has no need of)"
    );
}

#[test]
fn the_macro_runs_every_scenario() {
    assert_eq!(
        conformance::SCENARIO_NAMES,
        workerid_conformance::scenario_names()
    );
}
