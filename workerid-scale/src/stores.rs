//! The stores under test: each started by the harness (`workerid-testkit`)
//! on free loopback ports in a temporary directory, with one store handle
//! (one multiplexed connection, one pool, one etcd client) for all workers.

use std::sync::Arc;

use workerid::LeaseStore;
use workerid_testkit::RunningStore;
pub use workerid_testkit::StoreKind;

use crate::recorded::{self, Stats};
use crate::Error;

/// How to connect.
#[derive(Debug, Clone, Copy, Default)]
pub struct Connect {
    /// The SQL pool's largest number of connections; None: the store's
    /// default (10, or 1 for SQLite).
    pub max_connections: Option<u32>,
}

/// A store under test: the shared store handle (its calls recorded, see
/// [`recorded`]) and the store the harness runs for it (stopped when this
/// is dropped).
#[derive(Debug)]
pub struct Target {
    /// Which store.
    pub kind: StoreKind,
    /// The one store handle every worker shares.
    pub store: Arc<dyn LeaseStore>,
    stats: Arc<Stats>,
    running: RunningStore,
}

impl Target {
    /// The shared handle, as the fleet takes it.
    pub fn shared(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }

    /// What the calls into this kind of store have counted so far.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// The server's root pids (their descendants count too), if it has any.
    pub fn server_pids(&self) -> Option<Vec<u32>> {
        let pids = self.running.pids();
        (!pids.is_empty()).then_some(pids)
    }

    /// What the server's program says its version is (None in process).
    pub fn server_version(&self) -> Option<String> {
        self.running.server_version()
    }

    /// The disk syncs the store's servers have counted (see [`crate::syncs`]).
    pub async fn disk_syncs(&self) -> Option<u64> {
        crate::syncs::read(&self.running).await
    }

    /// Starts the store of `kind` (blocking, on a thread of its own) and
    /// connects one store handle.
    ///
    /// # Errors
    /// [`Error::Open`] when the store cannot be connected to.
    pub async fn start(kind: StoreKind, connect: Connect) -> Result<Target, Error> {
        let running = blocking(move || kind.start()).await?;
        let mut options = workerid::OpenOptions::new();
        if let Some(max) = connect.max_connections {
            options = options.max_connections(max);
        }
        let store = options.open(&running.url()).await?;
        Ok(Target {
            kind,
            stats: recorded::stats_for(store.kind().system_name()),
            store: store.lease_store(),
            running,
        })
    }
}

/// Runs a harness call (which blocks until the server answers) off the runtime.
async fn blocking<T: Send + 'static>(
    start: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(start)
        .await
        .map_err(|e| Error::Server(e.to_string()))
}
