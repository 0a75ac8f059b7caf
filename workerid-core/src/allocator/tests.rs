//! The allocator against scripted stores: deadlines, timeouts, input checks,
//! capabilities and acquires sent again.

use crate::compat::LibxCompat;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use super::*;

/// Answers every call with a fixed grant after `delay`, counting calls.
#[derive(Debug)]
struct Scripted {
    delay: Duration,
    grant: Grant,
    calls: Arc<AtomicUsize>,
    holder: Arc<std::sync::Mutex<Option<Holder>>>,
    /// The token of every acquire, in order.
    tokens: Arc<std::sync::Mutex<Vec<Token>>>,
    /// How many acquires are applied with their answer lost.
    lose: Arc<AtomicUsize>,
}

impl Scripted {
    fn new(delay: Duration, id: u32, fence: u64) -> (Self, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let store = Scripted {
            delay,
            grant: Grant {
                id: WorkerId::from(id),
                fence,
                previous_watermark: 7,
            },
            calls: calls.clone(),
            holder: Arc::default(),
            tokens: Arc::default(),
            lose: Arc::default(),
        };
        (store, calls)
    }

    async fn answer(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
    }
}

#[async_trait]
impl LeaseStore for Scripted {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    async fn acquire(
        &self,
        _: &Namespace,
        _: u32,
        token: &Token,
        _: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        *self.holder.lock().unwrap() = Some(holder.clone());
        self.tokens.lock().unwrap().push(*token);
        self.answer().await;
        let lost = self
            .lose
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match lost {
            Ok(_) => Err(Error::unavailable("scripted", "the answer was lost")),
            Err(_) => Ok(self.grant),
        }
    }
    async fn renew(
        &self,
        _: &Namespace,
        _: WorkerId,
        _: &Token,
        _: Duration,
        _: u64,
    ) -> Result<()> {
        self.answer().await;
        Ok(())
    }
    async fn release(&self, _: &Namespace, _: WorkerId, _: &Token, _: u64) -> Result<()> {
        self.answer().await;
        Ok(())
    }
}

const TTL: Duration = Duration::from_secs(10);

fn allocator(store: Scripted) -> Allocator {
    let options = LeaseOptions::new().worker_bits(4).max_lease_time(TTL);
    Allocator::new(store, "test", options).unwrap()
}

#[tokio::test]
async fn the_deadline_counts_from_the_send_instant_minus_the_drift_margin() {
    let delay = Duration::from_millis(300);
    let (store, _) = Scripted::new(delay, 3, 1);
    let allocator = allocator(store);
    let before = Instant::now();
    let mut lease = allocator.acquire().await.unwrap();
    let after = Instant::now();
    let margin = TTL / 100;
    assert!(lease.deadline() >= before + TTL - margin);
    assert!(lease.deadline() <= after - delay + TTL - margin);
    assert_eq!(lease.previous_watermark(), 7);
    assert_eq!(lease.token().to_string().len(), 22);

    let before = Instant::now();
    let deadline = allocator.renew(&mut lease).await.unwrap();
    assert!(deadline >= before + TTL - margin);
    assert!(deadline <= Instant::now() - delay + TTL - margin);
    assert_eq!(deadline, lease.deadline());
}

#[tokio::test]
async fn every_acquire_names_the_holder() {
    let (store, _) = Scripted::new(Duration::ZERO, 3, 1);
    let seen = store.holder.clone();
    let pod = Holder::new("prod/orders-1").unwrap();
    let options = LeaseOptions::new().worker_bits(4).holder(pod.clone());
    let allocator = Allocator::new(store, "test", options).unwrap();
    assert_eq!(allocator.holder(), &pod);
    allocator.acquire().await.unwrap();
    assert_eq!(seen.lock().unwrap().as_ref(), Some(&pod));
}

#[tokio::test]
async fn a_slow_store_is_unavailable_after_the_request_timeout() {
    let (store, _) = Scripted::new(Duration::from_secs(3600), 0, 1);
    let options = LeaseOptions::new().request_timeout(Duration::from_millis(50));
    let allocator = Allocator::new(store, "test", options).unwrap();
    let err = allocator.acquire().await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
}

#[tokio::test]
async fn nonsense_grants_are_unavailable_not_success() {
    for (id, fence) in [(16, 1), (0, 0)] {
        let (store, _) = Scripted::new(Duration::ZERO, id, fence);
        let err = allocator(store).acquire().await.unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err}");
    }
}

#[tokio::test]
async fn bad_input_never_reaches_the_store() {
    let (store, calls) = Scripted::new(Duration::ZERO, 0, 1);
    let allocator = allocator(store);
    let token = Token::generate().to_string();
    assert!(matches!(
        allocator.renew_id(16, &token).await,
        Err(Error::InvalidWorkerId {
            id: 16,
            max_worker_id: 15
        })
    ));
    assert!(matches!(
        allocator.release_id(0, "bad").await,
        Err(Error::InvalidToken { .. })
    ));
    assert!(matches!(
        allocator
            .acquire_with_ttl(TTL + Duration::from_millis(1))
            .await,
        Err(Error::InvalidConfig { .. })
    ));
    let mut foreign = allocator.acquire().await.unwrap();
    foreign.namespace = Namespace::new("other").unwrap();
    assert!(matches!(
        allocator.renew(&mut foreign).await,
        Err(Error::InvalidConfig { .. })
    ));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "only the good acquire was sent"
    );
}

/// Declares no listing, yet answers it: the allocator must not ask.
#[derive(Debug, Default)]
struct ListsUndeclared(Arc<AtomicUsize>);

#[async_trait]
impl LeaseStore for ListsUndeclared {
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    async fn acquire(
        &self,
        _: &Namespace,
        _: u32,
        _: &Token,
        _: Duration,
        _: &Holder,
    ) -> Result<Grant> {
        Err(Error::unavailable("test", "not asked"))
    }
    async fn renew(
        &self,
        _: &Namespace,
        _: WorkerId,
        _: &Token,
        _: Duration,
        _: u64,
    ) -> Result<()> {
        Err(Error::unavailable("test", "not asked"))
    }
    async fn release(&self, _: &Namespace, _: WorkerId, _: &Token, _: u64) -> Result<()> {
        Err(Error::unavailable("test", "not asked"))
    }
    async fn list(&self, _: &Namespace) -> Result<Listing> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Listing::unknown())
    }
    async fn force_release(&self, _: &Namespace, _: WorkerId) -> Result<bool> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }
}

#[tokio::test]
async fn the_capability_not_the_store_decides_whether_listing_is_asked() {
    let store = ListsUndeclared::default();
    let calls = store.0.clone();
    let options = LeaseOptions::new().worker_bits(4);
    let allocator = Allocator::new(store, "test", options).unwrap();
    assert_eq!(allocator.max_worker_id(), 15);
    assert!(matches!(
        allocator.list().await,
        Err(Error::Unsupported { operation: "list" })
    ));
    assert!(matches!(
        allocator.force_release(3).await,
        Err(Error::Unsupported { .. })
    ));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no listing call reached the store"
    );
}

#[tokio::test]
async fn listing_is_refused_before_io_without_the_capability() {
    let (store, calls) = Scripted::new(Duration::ZERO, 0, 1);
    let allocator = allocator(store);
    assert!(matches!(
        allocator.list().await,
        Err(Error::Unsupported { operation: "list" })
    ));
    assert!(matches!(
        allocator.force_release(16).await,
        Err(Error::InvalidWorkerId { id: 16, .. })
    ));
    let err = allocator.force_release(3).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }) && !err.is_retryable());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    // The trait's defaults say the same to a caller that skips the Allocator.
    let store = allocator.store();
    let ns = Namespace::new("test").unwrap();
    assert!(matches!(
        store.list(&ns).await,
        Err(Error::Unsupported { operation: "list" })
    ));
    assert!(matches!(
        store.force_release(&ns, WorkerId::from(0)).await,
        Err(Error::Unsupported {
            operation: "force_release"
        })
    ));
}

#[tokio::test]
async fn an_acquire_whose_answer_was_lost_is_sent_again_with_its_token() {
    let (store, _) = Scripted::new(Duration::ZERO, 3, 1);
    let (tokens, lose) = (store.tokens.clone(), store.lose.clone());
    lose.store(2, Ordering::SeqCst);
    let allocator = allocator(store);
    let clone = allocator.clone();
    assert!(allocator.acquire().await.unwrap_err().is_retryable());
    assert!(clone.acquire().await.unwrap_err().is_retryable());
    let lease = allocator.acquire().await.unwrap();
    let next = allocator.acquire().await.unwrap();
    let sent = tokens.lock().unwrap().clone();
    assert_eq!(sent.len(), 4);
    assert!(
        sent[..3].iter().all(|token| *token == lease.token),
        "every acquire until an answer came carried the first one's token"
    );
    assert_ne!(
        next.token, lease.token,
        "a token answered is never sent again"
    );
}

#[tokio::test]
async fn a_lease_kept_for_the_next_acquire_is_asked_for_again() {
    let (store, _) = Scripted::new(Duration::ZERO, 3, 1);
    let tokens = store.tokens.clone();
    let allocator = allocator(store);
    let lease = allocator.acquire().await.unwrap();
    allocator.clone().keep_for_next_acquire(&lease);
    let again = allocator.acquire().await.unwrap();
    assert_eq!(again.token, lease.token);
    let mut foreign = lease.clone();
    foreign.namespace = Namespace::new("other").unwrap();
    allocator.keep_for_next_acquire(&foreign);
    allocator.acquire().await.unwrap();
    let sent = tokens.lock().unwrap().clone();
    assert_eq!(sent.len(), 3);
    assert_ne!(
        sent[2], lease.token,
        "a lease of another namespace is ignored"
    );
}

/// An acquire dropped while the store works on it (a caller's timeout, a
/// cancelled task) may be granted all the same: its token is sent again by
/// the next acquire, which adopts that grant instead of leaving it held by
/// nobody for a ttl.
#[tokio::test]
async fn an_acquire_dropped_before_its_answer_is_sent_again_with_its_token() {
    let (store, _) = Scripted::new(Duration::from_millis(300), 3, 1);
    let tokens = store.tokens.clone();
    let allocator = allocator(store);
    for _ in 0..3 {
        let cancelled = tokio::time::timeout(Duration::from_millis(20), allocator.acquire()).await;
        assert!(cancelled.is_err(), "the caller gave up first");
    }
    let lease = allocator.acquire().await.unwrap();
    let sent = tokens.lock().unwrap().clone();
    assert_eq!(sent.len(), 4);
    assert!(
        sent.iter().all(|token| *token == lease.token),
        "every acquire carried the first one's token until one was answered"
    );
    let next = allocator.acquire().await.unwrap();
    assert_ne!(
        next.token, lease.token,
        "a token answered is never sent again"
    );
}

#[test]
fn bad_namespace_or_options_make_no_allocator() {
    let (store, _) = Scripted::new(Duration::ZERO, 0, 1);
    let store: Arc<dyn LeaseStore> = Arc::new(store);
    assert!(Allocator::from_arc(store.clone(), "no spaces", LeaseOptions::new()).is_err());
    assert!(Allocator::from_arc(store, "ok", LeaseOptions::new().worker_bits(0)).is_err());
}
