//! A lease store that notes every grant it hands its client, so that the
//! client's history says which grants it received, whether or not the join
//! that asked for them went on to use them (a join can fail after its
//! acquire, when the link breaks during its wait or its first renewal).
//! The orphan check ([`GrantWatcher`](crate::network::GrantWatcher)) then
//! counts only grants no client received: an acquire applied whose answer
//! was lost and never asked for again.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use workerid::{Capabilities, Grant, Holder, LeaseStore, Namespace, Result, Token, WorkerId};

use crate::clock::mono_ns;
use crate::history::Event;

/// Forwards acquire, renew and release to the store it wraps; notes each
/// grant answered. A client never lists, so the operator's methods are left
/// out (and not declared).
#[derive(Debug)]
pub(crate) struct Answered {
    inner: Arc<dyn LeaseStore>,
    noted: Arc<Mutex<Vec<Event>>>,
}

impl Answered {
    /// Wraps `inner`; the grants go to the returned list, as
    /// [`Event::Acquired`], for the client to write to its history.
    pub(crate) fn wrap(
        inner: Arc<dyn LeaseStore>,
    ) -> (Arc<dyn LeaseStore>, Arc<Mutex<Vec<Event>>>) {
        let noted = Arc::new(Mutex::new(Vec::new()));
        let store = Answered {
            inner,
            noted: Arc::clone(&noted),
        };
        (Arc::new(store), noted)
    }
}

/// Takes the grants noted so far.
pub(crate) fn take(noted: &Mutex<Vec<Event>>) -> Vec<Event> {
    std::mem::take(&mut *noted.lock().unwrap_or_else(PoisonError::into_inner))
}

#[async_trait]
impl LeaseStore for Answered {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            list: false,
            ..self.inner.capabilities()
        }
    }
    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        let grant = self
            .inner
            .acquire(namespace, max_worker_id, token, ttl, holder)
            .await?;
        self.noted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Event::Acquired {
                worker_id: grant.id.get(),
                fence: grant.fence,
                at: mono_ns(),
            });
        Ok(grant)
    }
    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        self.inner.renew(namespace, id, token, ttl, watermark).await
    }
    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        self.inner.release(namespace, id, token, watermark).await
    }
}
