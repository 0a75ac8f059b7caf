//! The stores under test: each started by the harness (`workerid-testkit`)
//! on free loopback ports in a temporary directory, with one store handle
//! (one multiplexed connection, one pool, one etcd client) for all workers.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use workerid::LeaseStore;
pub use workerid_testkit::StoreKind;

use crate::timed::TimedStore;
use crate::Error;

/// How to connect.
#[derive(Debug, Clone, Copy)]
pub struct Connect {
    /// The SQL pool's largest number of connections.
    pub max_connections: u32,
}

impl Default for Connect {
    fn default() -> Self {
        Connect {
            max_connections: 10,
        }
    }
}

/// A store under test: the shared, timed store handle and the server behind it.
pub struct Target {
    /// Which store.
    pub kind: StoreKind,
    /// The one store handle every worker shares, timed.
    pub store: TimedStore,
    /// The server processes' pids (none for an embedded store).
    pids: Vec<u32>,
    /// Keeps the server (or the SQLite file) alive; dropping it stops the server.
    _server: Box<dyn Any + Send>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("kind", &self.kind)
            .field("pids", &self.pids)
            .finish()
    }
}

impl Target {
    /// A target on a store that is already open; `pids` are its server's
    /// processes, if it has any on this machine.
    pub fn new(
        kind: StoreKind,
        store: Arc<dyn LeaseStore>,
        pids: Vec<u32>,
        server: Box<dyn Any + Send>,
    ) -> Target {
        Target {
            kind,
            store: TimedStore::new(store),
            pids,
            _server: server,
        }
    }

    /// The shared handle, as the fleet takes it.
    pub fn shared(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.store.clone())
    }

    /// The server's root pids (their descendants count too), if any.
    pub fn server_pids(&self) -> Option<Vec<u32>> {
        (!self.pids.is_empty()).then(|| self.pids.clone())
    }

    /// Starts the store of `kind` (blocking, on a thread of its own) and
    /// connects one store handle.
    ///
    /// # Errors
    /// [`Error::Open`] when the store cannot be connected to.
    pub async fn start(kind: StoreKind, connect: Connect) -> Result<Target, Error> {
        let running = blocking(move || kind.start()).await?;
        let store = workerid::OpenOptions::new()
            .max_connections(connect.max_connections)
            .open(&running.url())
            .await?;
        let pids = running.pids();
        Ok(Target::new(
            kind,
            store.lease_store(),
            pids,
            Box::new(running),
        ))
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
