//! A lease store for the snowflake worker's tests, shared by their binaries.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use workerid_core::{
    Capabilities, Error, Grant, Holder, LeaseStore, Namespace, Result, Token, WorkerId,
};
use workerid_memory::MemoryStore;

/// A store that can be cut off, recording when each successful renewal was
/// sent, and that can declare a quarantine of expired IDs.
#[derive(Debug)]
pub struct Flaky {
    pub inner: MemoryStore,
    pub down: AtomicBool,
    /// Renewals that raise the watermark are written, then answered with an
    /// error (a lost answer).
    pub lose_raises: AtomicBool,
    pub renewed: Mutex<Vec<Instant>>,
    /// Renewals refused while down.
    pub refused: std::sync::atomic::AtomicU64,
    pub quarantine: bool,
}

impl Flaky {
    pub fn new(quarantine: bool) -> Arc<Flaky> {
        Arc::new(Flaky {
            inner: MemoryStore::new(),
            down: AtomicBool::new(false),
            lose_raises: AtomicBool::new(false),
            renewed: Mutex::new(Vec::new()),
            refused: Default::default(),
            quarantine,
        })
    }
}

#[async_trait]
impl LeaseStore for Flaky {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            quarantine: self.quarantine,
            ..self.inner.capabilities()
        }
    }
    async fn acquire(
        &self,
        ns: &Namespace,
        max: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        self.inner.acquire(ns, max, token, ttl, holder).await
    }
    async fn renew(
        &self,
        ns: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        let sent = Instant::now();
        if self.down.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(Error::unavailable("flaky", "cut off"));
        }
        self.inner.renew(ns, id, token, ttl, watermark).await?;
        if watermark != 0 && self.lose_raises.load(Ordering::SeqCst) {
            return Err(Error::unavailable("flaky", "the answer was lost"));
        }
        self.renewed.lock().unwrap().push(sent);
        Ok(())
    }
    async fn release(
        &self,
        ns: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        if self.down.load(Ordering::SeqCst) {
            return Err(Error::unavailable("flaky", "cut off"));
        }
        self.inner.release(ns, id, token, watermark).await
    }
}
