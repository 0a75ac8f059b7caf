//! The connection to the etcd cluster: one client per endpoint, a sticky
//! current endpoint, and retries on another endpoint when one fails.
//!
//! etcd-client balances over all endpoints of one channel and keeps sending
//! to an endpoint that is down; here each endpoint has its own client, the
//! store sticks to the one that last worked, and moves on to the next one when
//! a request fails for a reason another member may not have (connection
//! refused, timeout, "no leader"). Every operation of the store is written so
//! that sending it twice is safe (see the crate docs), which is what makes
//! these retries correct.
//!
//! The current endpoint is the leader's when the store can tell which it is,
//! and the store knows whether the cluster has a single member (see
//! [`crate::leader`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::Client;
use tokio::sync::OnceCell;
use tokio::time::Instant;
use workerid_core::{Error, Result};

use crate::leader::{same_endpoint, ClusterCheck};
use crate::member::MemberSettings;

/// What an answer came with.
pub(crate) struct Answer<T> {
    pub value: T,
    /// Whether an earlier attempt failed in a way that leaves its outcome
    /// unknown (it may have been applied).
    pub retried: bool,
}

struct Endpoint {
    url: String,
    client: OnceCell<Client>,
}

pub(crate) struct Cluster {
    endpoints: Vec<Endpoint>,
    /// The current endpoint's index (low 32 bits) and how many times it
    /// changed (high 32 bits), so that a leader check that took long does
    /// not undo a move made meanwhile by a failure.
    current: AtomicU64,
    member: MemberSettings,
    operation_timeout: Duration,
    /// When the members are next counted (and the leader looked for).
    check: ClusterCheck,
    /// Whether the check looks for the leader (more than one endpoint, and
    /// not turned off).
    find_leader: bool,
    /// Whether the last check counted a single member; false until one did,
    /// and after a check failed.
    lone: AtomicBool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.endpoints.iter().map(|e| e.url.as_str()).collect();
        f.debug_struct("Cluster")
            .field("endpoints", &urls)
            .field("operation_timeout", &self.operation_timeout)
            .field("current", &index_of(self.current.load(Ordering::Relaxed)))
            .field("find_leader", &self.find_leader)
            .field("lone", &self.lone.load(Ordering::Relaxed))
            .finish()
    }
}

impl Cluster {
    /// A cluster of `urls`, checked every `check_every`: its members counted
    /// and, with `find_leader` (and more than one endpoint), its leader
    /// looked for.
    pub(crate) fn new(
        urls: Vec<String>,
        member: MemberSettings,
        operation_timeout: Duration,
        (check_every, find_leader): (Duration, bool),
    ) -> Arc<Self> {
        // A check takes at most the operation timeout; past twice that its
        // task is taken for lost.
        let check = ClusterCheck::new(check_every, operation_timeout * 2);
        let find_leader = find_leader && urls.len() > 1;
        Arc::new(Cluster {
            endpoints: urls
                .into_iter()
                .map(|url| Endpoint {
                    url,
                    client: OnceCell::new(),
                })
                .collect(),
            current: AtomicU64::new(0),
            member,
            operation_timeout,
            check,
            find_leader,
            lone: AtomicBool::new(false),
        })
    }

    async fn client(&self, index: usize) -> std::result::Result<Client, etcd_client::Error> {
        let endpoint = &self.endpoints[index];
        endpoint
            .client
            .get_or_try_init(|| self.member.client(&endpoint.url))
            .await
            .cloned()
    }

    /// Moves off `index` (unless another caller did already).
    fn rotate(&self, index: usize) {
        self.check.member_failed();
        let next = (index + 1) % self.endpoints.len();
        let mut seen = self.current.load(Ordering::Acquire);
        while index_of(seen) == index {
            match self.current.compare_exchange(
                seen,
                moved_to(seen, next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
    }

    /// Runs `request` on the current endpoint, and on the next ones while it
    /// fails for a reason worth retrying, until the operation timeout.
    ///
    /// # Errors
    /// [`Error::Unavailable`] with the last cause.
    pub(crate) async fn call<T, F, Fut>(
        self: &Arc<Self>,
        what: &'static str,
        mut request: F,
    ) -> Result<Answer<T>>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.operation_timeout;
        let mut retried = false;
        let mut pause = Duration::from_millis(10);
        loop {
            let index = index_of(self.current.load(Ordering::Acquire));
            let outcome = match self.client(index).await {
                Ok(client) => match tokio::time::timeout_at(deadline, request(client)).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        // The whole operation went unanswered here (a frozen
                        // member answers nothing, not even an error): the
                        // next operation starts on another member.
                        self.rotate(index);
                        return Err(Error::unavailable(
                            "etcd",
                            format!("{what}: no answer within {:?}", self.operation_timeout),
                        ));
                    }
                },
                Err(e) => Err(e),
            };
            let error = match outcome {
                Ok(value) => {
                    self.check_if_due();
                    return Ok(Answer { value, retried });
                }
                Err(e) => e,
            };
            if !worth_retrying(&error) {
                return Err(Error::unavailable("etcd", format!("{what}: {error}")));
            }
            retried = true;
            tracing::debug!(
                endpoint = %self.endpoints[index].url,
                "etcd {what} failed ({error}); trying the next endpoint"
            );
            self.rotate(index);
            if Instant::now() + pause >= deadline {
                return Err(Error::unavailable(
                    "etcd",
                    format!(
                        "{what}: no endpoint answered within {:?}; last error: {error}",
                        self.operation_timeout
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// A client for the current endpoint (for watches, which handle their own
    /// failures).
    pub(crate) async fn current(&self) -> Result<(usize, Client)> {
        let index = index_of(self.current.load(Ordering::Acquire));
        match self.client(index).await {
            Ok(client) => Ok((index, client)),
            Err(e) => {
                self.rotate(index);
                Err(Error::unavailable("etcd", e))
            }
        }
    }

    /// Tells the cluster that `index` failed a watch.
    pub(crate) fn failed(&self, index: usize) {
        self.rotate(index);
    }
}

impl Cluster {
    /// Whether the cluster had a single member when last checked (at most
    /// the check interval ago, or a second after a member failed).
    pub(crate) fn lone_member(&self) -> bool {
        self.lone.load(Ordering::Acquire)
    }

    /// Checks the cluster now (when the store connects): counts its members
    /// and moves to the leader's endpoint if the store looks for it and can
    /// tell which it is.
    pub(crate) async fn check_now(self: &Arc<Self>) {
        if let Some(checking) = Checking::now(self) {
            checking.0.check().await;
        }
    }

    /// Starts a check in the background if one is due (after an answer:
    /// [`Cluster::call`]'s, or a keep-alive's on a stream of its own).
    pub(crate) fn check_if_due(self: &Arc<Self>) {
        if self.check.claim() {
            let checking = Checking(self.clone());
            tokio::spawn(async move { checking.0.check().await });
        }
    }

    /// Counts the members, then moves to the leader's endpoint if it is
    /// another one than the current (and nothing moved the store meanwhile);
    /// when the check cannot tell, the cluster counts as more than one
    /// member and the check runs again a second later.
    async fn check(&self) {
        let seen = self.current.load(Ordering::Acquire);
        let asked = index_of(seen);
        let found = tokio::time::timeout(self.operation_timeout, self.leader_among(asked))
            .await
            .unwrap_or_else(|_| Err("no answer".to_string()));
        match found {
            Ok(Some(leader)) if leader != asked => {
                let moved = self
                    .current
                    .compare_exchange(
                        seen,
                        moved_to(seen, leader),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok();
                if moved {
                    tracing::debug!(endpoint = %self.endpoints[leader].url, "etcd: sending to the leader");
                }
            }
            Ok(_) => {}
            Err(why) => {
                tracing::debug!("etcd: checking the cluster: {why}");
                self.lone.store(false, Ordering::Release);
                self.check.member_failed();
            }
        }
    }

    /// Counts the members as the member at `asked` lists them (recorded in
    /// `lone`); then, if the store looks for the leader, the index of the
    /// leader's endpoint as that member and then the leader itself say.
    /// None when the leader is not looked for or not among the endpoints;
    /// an error when this cannot tell (no answer, no leader yet, or the
    /// member named does not say it leads).
    async fn leader_among(&self, asked: usize) -> std::result::Result<Option<usize>, String> {
        let text = |e: etcd_client::Error| e.to_string();
        let mut client = self.client(asked).await.map_err(text)?;
        let members = client.member_list().await.map_err(text)?;
        self.lone
            .store(members.members().len() == 1, Ordering::Release);
        if !self.find_leader {
            return Ok(None);
        }
        let leader = client.status().await.map_err(text)?.leader();
        if leader == 0 {
            return Err("no leader yet".into());
        }
        let urls = match members.members().iter().find(|m| m.id() == leader) {
            Some(member) => member.client_urls(),
            None => return Err(format!("leader {leader:x} is not a member yet")),
        };
        let found = self
            .endpoints
            .iter()
            .position(|e| urls.iter().any(|url| same_endpoint(url, &e.url)));
        let Some(index) = found else {
            tracing::debug!("etcd: the leader's URLs {urls:?} are not among the endpoints");
            return Ok(None);
        };
        if index == asked {
            return Ok(Some(index));
        }
        let status = self
            .client(index)
            .await
            .map_err(text)?
            .status()
            .await
            .map_err(text)?;
        if status.header().map(|h| h.member_id()) == Some(status.leader()) {
            Ok(Some(index))
        } else {
            Err(format!(
                "{} does not say it leads",
                self.endpoints[index].url
            ))
        }
    }
}

/// The endpoint index in a [`Cluster::current`] word.
fn index_of(word: u64) -> usize {
    (word & u64::from(u32::MAX)) as usize
}

/// `word` moved to endpoint `index`, one change later.
fn moved_to(word: u64, index: usize) -> u64 {
    let changes = (word >> 32).wrapping_add(1) & u64::from(u32::MAX);
    (changes << 32) | (index as u64 & u64::from(u32::MAX))
}

/// A claimed cluster check; dropped (done, or its task cancelled), it ends.
struct Checking(Arc<Cluster>);

impl Checking {
    fn now(cluster: &Arc<Cluster>) -> Option<Checking> {
        cluster.check.claim_now().then(|| Checking(cluster.clone()))
    }
}

impl Drop for Checking {
    fn drop(&mut self) {
        self.0.check.finish();
    }
}

/// Whether another attempt, maybe on another member, can succeed.
fn worth_retrying(error: &etcd_client::Error) -> bool {
    use tonic::Code;
    match error {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Unknown
                | Code::Cancelled
                | Code::Aborted
                | Code::ResourceExhausted
                | Code::Internal
        ),
        _ => false,
    }
}
