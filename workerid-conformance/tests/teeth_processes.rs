//! The scenario that contends from several OS processes has teeth of its
//! own: the reference store with its state in a file passes it when every
//! handle locks the file, and fails it when each process locks only within
//! itself, a breakage no contender in one process can see.

// This binary uses one of the reference store's flaws.
#[allow(dead_code)]
#[path = "teeth/reference.rs"]
mod reference;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use reference::{Flaw, ReferenceStore};
use workerid_conformance::{in_contending_process, run_named, StoreFactory};
use workerid_core::LeaseStore;
use workerid_memory::ManualClock;

/// Where a contending process finds its parent's state file.
const STATE_ENV: &str = "WORKERID_TEETH_STATE_FILE";

struct Factory(ReferenceStore);

impl Factory {
    /// A reference store with `flaw` on a state file of its own, or, in a
    /// contending process, on its parent's.
    fn new(test: &str, flaw: Option<Flaw>) -> Self {
        let path = std::env::var_os(STATE_ENV).map_or_else(
            || {
                let path = std::env::temp_dir().join(format!(
                    "workerid-teeth-{}-{test}.state",
                    std::process::id()
                ));
                // A leftover of an earlier run with the same process ID.
                let _ = std::fs::remove_file(&path);
                path
            },
            PathBuf::from,
        );
        Self(ReferenceStore {
            flaw,
            cut: false,
            quarantine: false,
            clock: Arc::new(ManualClock::new()),
            state: Arc::default(),
            file: Some(Arc::new(path)),
            own: Arc::default(),
        })
    }

    fn path(&self) -> PathBuf {
        self.0.file.as_deref().cloned().expect("a state file")
    }
}

#[async_trait]
impl StoreFactory for Factory {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.0.clone())
    }
    fn share_with_children(&self) -> Option<Vec<(String, String)>> {
        Some(vec![(
            STATE_ENV.to_string(),
            self.path().to_string_lossy().into_owned(),
        )])
    }
}

/// Runs the scenario on a reference store with `flaw`; the panic message
/// when it fails. A contending process only contends.
fn contend(test: &str, flaw: Option<Flaw>) -> Result<(), String> {
    let mut path = None;
    let result = catch_unwind(AssertUnwindSafe(|| {
        run_named("contention_across_processes", || async {
            let factory = Factory::new(test, flaw);
            path = Some(factory.path());
            factory
        })
    }));
    if let (Some(path), false) = (path, in_contending_process()) {
        let _ = std::fs::remove_file(path);
    }
    result.map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

#[test]
fn a_file_locked_across_processes_passes() {
    if let Err(failure) = contend("a_file_locked_across_processes_passes", None) {
        panic!("the flawless store failed across processes: {failure}");
    }
}

#[test]
fn catches_a_lock_held_within_one_process_only() {
    let result = contend(
        "catches_a_lock_held_within_one_process_only",
        Some(Flaw::LocksInProcessOnly),
    );
    if in_contending_process() {
        result.expect("a contending process only contends");
        return;
    }
    let failure = result.expect_err("processes that overwrite each other's grants must fail");
    assert!(
        failure.contains("granted to two processes") || failure.contains("free IDs"),
        "the scenario must fail on two holders of one ID, not on: {failure}"
    );
}
