//! An acquire whose answer is lost and that the store applies late, after
//! the same allocator heard that the pool was full (a request queued behind
//! a partition and delivered when it heals): the grant it makes is adopted
//! by the allocator's next acquire, not left held by nobody for a ttl.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::oneshot;
use workerid::memory::MemoryStore;
use workerid::{
    Allocator, Capabilities, Error, Grant, Holder, LeaseOptions, LeaseStore, Namespace, Result,
    Token, WorkerId,
};

/// The memory store, whose first acquire is answered `Unavailable` at once
/// and applied only when the test says so.
#[derive(Debug)]
struct LateFirstAcquire {
    inner: Arc<MemoryStore>,
    release_it: Mutex<Option<oneshot::Receiver<()>>>,
    applied: Mutex<Option<oneshot::Sender<Result<Grant>>>>,
}

#[async_trait]
impl LeaseStore for LateFirstAcquire {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        let held_back = self.release_it.lock().unwrap().take();
        let Some(go) = held_back else {
            return (self
                .inner
                .acquire(namespace, max_worker_id, token, ttl, holder))
            .await;
        };
        let applied = self.applied.lock().unwrap().take().unwrap();
        let (inner, namespace, token, holder) = (
            self.inner.clone(),
            namespace.clone(),
            *token,
            holder.clone(),
        );
        tokio::spawn(async move {
            let _ = go.await;
            let grant = inner
                .acquire(&namespace, max_worker_id, &token, ttl, &holder)
                .await;
            let _ = applied.send(grant);
        });
        Err(Error::unavailable("test", "the answer was lost"))
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

#[tokio::test]
async fn a_grant_applied_after_the_pool_looked_full_is_adopted() {
    let memory = Arc::new(MemoryStore::new());
    let (go, release_it) = oneshot::channel();
    let (applied, late_grant) = oneshot::channel();
    let store = LateFirstAcquire {
        inner: memory.clone(),
        release_it: Mutex::new(Some(release_it)),
        applied: Mutex::new(Some(applied)),
    };
    let options = LeaseOptions::new()
        .worker_bits(1)
        .ttl(Duration::from_secs(30));
    let ours = Allocator::new(store, "lost", options.clone()).unwrap();
    let theirs = Allocator::new(memory.clone(), "lost", options).unwrap();
    let first = theirs.acquire().await.unwrap();
    let _second = theirs.acquire().await.unwrap();

    let lost = ours.acquire().await.unwrap_err();
    assert!(lost.is_retryable(), "{lost}");
    let full = ours.acquire().await.unwrap_err();
    assert!(matches!(full, Error::NoAvailableId { .. }), "{full}");

    // An ID frees up, and only then is the first acquire applied.
    theirs.release(&first).await.unwrap();
    go.send(()).unwrap();
    let late = late_grant
        .await
        .unwrap()
        .expect("the late acquire is granted");

    let adopted = ours
        .acquire()
        .await
        .expect("the next acquire is answered by the late grant");
    assert_eq!(
        (adopted.id(), adopted.fence()),
        (late.id, late.fence),
        "the late grant is adopted, not left held by nobody"
    );
    ours.release(&adopted).await.unwrap();
    let again = theirs
        .acquire()
        .await
        .expect("the adopted ID is free again");
    assert_eq!(again.id(), late.id);
}
