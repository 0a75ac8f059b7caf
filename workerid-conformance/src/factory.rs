//! How the suite reaches the store under test.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use workerid_core::LeaseStore;

/// Makes handles on the store under test. Implement it once per store.
///
/// Every scenario leases in a namespace of its own, so handles may share one
/// backend (one server per test binary) while scenarios run in parallel.
///
/// ```
/// use std::sync::Arc;
/// use async_trait::async_trait;
/// use workerid_conformance::StoreFactory;
/// use workerid_core::LeaseStore;
/// use workerid_memory::MemoryStore;
///
/// struct Factory(MemoryStore);
///
/// #[async_trait]
/// impl StoreFactory for Factory {
///     async fn connect(&self) -> Arc<dyn LeaseStore> {
///         Arc::new(self.0.clone()) // clones share the leases
///     }
/// }
/// ```
#[async_trait]
pub trait StoreFactory: Send + Sync {
    /// A new handle on the store under test, with its own connection(s) where
    /// the store has any. All handles see the same leases. Panics if the store
    /// cannot be reached (a test failure, never a skip).
    async fn connect(&self) -> Arc<dyn LeaseStore>;

    /// Lets `duration` pass on the store's clock. The default sleeps; a store
    /// with a controllable clock moves it instead.
    async fn advance(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }

    /// Whether [`advance`](Self::advance) is instantaneous (virtual time).
    fn virtual_time(&self) -> bool {
        false
    }

    /// Whether [`restart`](Self::restart) is supported. Restarting a server
    /// shared by scenarios running in parallel would break them: only a
    /// factory with a server of its own should say yes.
    fn supports_restart(&self) -> bool {
        false
    }

    /// Restarts the store, keeping its data, and returns once it answers again.
    async fn restart(&self) {
        panic!("this StoreFactory does not support restart");
    }

    /// A handle that connected to the store under test and then lost its
    /// server for good (a relay between them stopped: connections reset,
    /// the port refused). Every call on it must answer `Unavailable` and
    /// change nothing. `None`, the default, for a store without a server to
    /// lose (in-process, a file): the scenario that needs it is skipped.
    async fn unreachable(&self) -> Option<Arc<dyn LeaseStore>> {
        None
    }

    /// Environment variables with which this test binary, run again as a
    /// child process, makes its factory on the same store (the test kit's
    /// servers are reused when `WORKERID_REDIS_URL` and the like are set).
    /// `None`, the default, for a store other processes cannot reach: the
    /// scenarios that contend from several processes are skipped.
    fn share_with_children(&self) -> Option<Vec<(String, String)>> {
        None
    }
}
