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

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tokio::sync::OnceCell;
use tokio::time::Instant;
use workerid_core::{Error, Result};

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
    current: AtomicUsize,
    options: ConnectOptions,
    operation_timeout: Duration,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.endpoints.iter().map(|e| e.url.as_str()).collect();
        f.debug_struct("Cluster")
            .field("endpoints", &urls)
            .field("operation_timeout", &self.operation_timeout)
            .finish()
    }
}

impl Cluster {
    pub fn new(urls: Vec<String>, options: ConnectOptions, operation_timeout: Duration) -> Self {
        Cluster {
            endpoints: urls
                .into_iter()
                .map(|url| Endpoint {
                    url,
                    client: OnceCell::new(),
                })
                .collect(),
            current: AtomicUsize::new(0),
            options,
            operation_timeout,
        }
    }

    async fn client(&self, index: usize) -> std::result::Result<Client, etcd_client::Error> {
        let endpoint = &self.endpoints[index];
        endpoint
            .client
            .get_or_try_init(|| {
                Client::connect([endpoint.url.as_str()], Some(self.options.clone()))
            })
            .await
            .cloned()
    }

    /// Moves off `index` (unless another caller did already).
    fn rotate(&self, index: usize) {
        let next = (index + 1) % self.endpoints.len();
        let _ = self
            .current
            .compare_exchange(index, next, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Runs `request` on the current endpoint, and on the next ones while it
    /// fails for a reason worth retrying, until the operation timeout.
    ///
    /// # Errors
    /// [`Error::Unavailable`] with the last cause.
    pub async fn call<T, F, Fut>(&self, what: &'static str, mut request: F) -> Result<Answer<T>>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.operation_timeout;
        let mut retried = false;
        let mut pause = Duration::from_millis(10);
        loop {
            let index = self.current.load(Ordering::Acquire);
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
                Ok(value) => return Ok(Answer { value, retried }),
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
    pub async fn current(&self) -> Result<(usize, Client)> {
        let index = self.current.load(Ordering::Acquire);
        match self.client(index).await {
            Ok(client) => Ok((index, client)),
            Err(e) => {
                self.rotate(index);
                Err(Error::unavailable("etcd", e))
            }
        }
    }

    /// Tells the cluster that `index` failed a watch.
    pub fn failed(&self, index: usize) {
        self.rotate(index);
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
