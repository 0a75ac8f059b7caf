//! The service run's observers: HTTP and gRPC clients that ask a server for
//! IDs and record each one before counting it as acknowledged, and a poller
//! that lists the lease namespace in the store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, LeaseOptions, Listing};
use workerid_client::ServerStore;
use workerid_proto::v1::ids_client::IdsClient;
use workerid_proto::v1::{NextIdsRequest, NextSnowflakesRequest};

use crate::clock::mono_ns;
use crate::http::HttpClient;
use crate::service_check::{Endpoint, LeasePoll, Received};

/// How long a request may take before the client gives up on it (a frozen
/// server answers nothing).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// How an error answer counts among the failures: its status and the
/// stable code the server gives (go-id-alloc's JSON `code`, Leaf's `code:
/// message`), e.g. `HTTP 500 store_unavailable`.
fn failure_of(answer: &crate::http::Answer) -> String {
    let body = answer.body.as_str();
    let json_code = body
        .split_once("\"code\":\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(code, _)| code);
    let text_code = body
        .split_once(':')
        .map(|(code, _)| code)
        .filter(|code| code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    let code = json_code.or(text_code).unwrap_or("(no code)");
    format!("HTTP {} {code}", answer.status)
}

/// How a request that got no answer at all (timed out, refused, reset)
/// counts among the failures.
pub(crate) const NO_ANSWER: &str = "no answer";

/// How often the poller lists the leases.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What the clients, the poller and the nemesis share.
#[derive(Debug)]
pub(crate) struct Shared {
    ids: Mutex<Vec<Received>>,
    polls: Mutex<Vec<LeasePoll>>,
    /// IDs counted as acknowledged, each after it was recorded.
    pub acknowledged: AtomicU64,
    /// Requests that got no ID, by how they failed (`HTTP 503`, `gRPC
    /// Unavailable`, `no answer`, ...).
    failures: Mutex<BTreeMap<String, u64>>,
    /// Per server, when the latest answered snowflake request was sent.
    pub last_snowflake_sent: Vec<AtomicU64>,
    /// Tells everyone to finish.
    pub stop: AtomicBool,
}

impl Shared {
    pub fn new(servers: usize) -> Shared {
        Shared {
            ids: Mutex::new(Vec::new()),
            polls: Mutex::new(Vec::new()),
            acknowledged: AtomicU64::new(0),
            failures: Mutex::default(),
            last_snowflake_sent: (0..servers).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
        }
    }

    pub fn lock_ids(&self) -> MutexGuard<'_, Vec<Received>> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a request that got no ID, failed as `how`.
    pub fn fail(&self, how: String) {
        *self
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(how)
            .or_default() += 1;
    }

    /// The requests that got no ID, by how they failed.
    pub fn failures(&self) -> BTreeMap<String, u64> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn lock_polls(&self) -> MutexGuard<'_, Vec<LeasePoll>> {
        self.polls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One client of server `server` (at `address`) until told to stop: cycles
/// through the endpoints, half of its requests for snowflake IDs (what the
/// recovery figures are measured on), the rest for the tags' segment IDs on
/// both APIs, one request in four a batch (`count=`). Client `n` starts at
/// another point of the cycle.
pub(crate) fn serve_requests(
    shared: &Shared,
    server: usize,
    address: std::net::SocketAddr,
    tags: &[String],
    n: usize,
    pause: Duration,
) {
    let mut client = HttpClient::at(address, REQUEST_TIMEOUT);
    let mut cycle: Vec<(Endpoint, String, String)> = Vec::new();
    for tag in tags {
        for (endpoint, tag, path) in [
            (
                Endpoint::Alloc,
                tag.clone(),
                format!("/alloc?biz_tag={tag}"),
            ),
            (
                Endpoint::LeafSnowflake,
                String::new(),
                "/api/snowflake/get/k".into(),
            ),
            (
                Endpoint::LeafSegment,
                tag.clone(),
                format!("/api/segment/get/{tag}"),
            ),
            (
                Endpoint::LeafSnowflake,
                String::new(),
                "/api/snowflake/get/k?count=5".into(),
            ),
            (
                Endpoint::Alloc,
                tag.clone(),
                format!("/alloc?biz_tag={tag}&count=5"),
            ),
            (
                Endpoint::LeafSnowflake,
                String::new(),
                "/api/snowflake/get/k".into(),
            ),
            (
                Endpoint::LeafSegment,
                tag.clone(),
                format!("/api/segment/get/{tag}?count=5"),
            ),
            (
                Endpoint::LeafSnowflake,
                String::new(),
                "/api/snowflake/get/k".into(),
            ),
        ] {
            cycle.push((endpoint, tag, path));
        }
    }
    let mut i = n * 3;
    while !shared.stop.load(Ordering::Relaxed) {
        let (endpoint, tag, path) = &cycle[i % cycle.len()];
        i += 1;
        let sent = mono_ns();
        let ids = match client.get(path) {
            Ok(answer) if answer.status == 200 => served_ids(*endpoint, path, &answer.body)
                .ok_or_else(|| "HTTP 200 without IDs".to_string()),
            Ok(answer) => Err(failure_of(&answer)),
            Err(_) => Err(NO_ANSWER.to_string()),
        };
        let received = mono_ns();
        let answered = Answered {
            server,
            endpoint: *endpoint,
            tag,
            sent,
            received,
        };
        if !shared.record(&answered, ids.as_deref().map_err(String::clone)) {
            // A server that is down refuses at once: do not spin.
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(pause);
    }
}

/// One request's answer, for [`Shared::record`].
struct Answered<'a> {
    server: usize,
    endpoint: Endpoint,
    tag: &'a str,
    sent: u64,
    received: u64,
}

impl Shared {
    /// Records the IDs a request got (first recorded, then acknowledged:
    /// the checker sees every ID a client could have handed on), or counts
    /// it failed, by how; whether it got IDs.
    fn record(&self, answered: &Answered<'_>, ids: std::result::Result<&[u64], String>) -> bool {
        let ids = match ids {
            Ok(ids) => ids,
            Err(how) => {
                self.fail(how);
                return false;
            }
        };
        let Answered {
            server,
            endpoint,
            tag,
            sent,
            received,
        } = *answered;
        self.lock_ids().extend(ids.iter().map(|&id| Received {
            server,
            endpoint,
            tag: tag.to_owned(),
            id,
            sent,
            received,
        }));
        self.acknowledged
            .fetch_add(ids.len() as u64, Ordering::Relaxed);
        if endpoint.served_snowflake() {
            self.last_snowflake_sent[server].fetch_max(sent, Ordering::Relaxed);
        }
        true
    }
}

/// One gRPC client of server `server` (its gRPC port at `address`) until
/// told to stop: snowflake and segment IDs, one and five at a time, in
/// turn, each recorded as the HTTP clients' are.
pub(crate) fn serve_grpc_requests(
    shared: &Shared,
    server: usize,
    address: std::net::SocketAddr,
    tags: &[String],
    n: usize,
    pause: Duration,
) {
    let Some(runtime) = thread_runtime("a gRPC client") else {
        return;
    };
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{address}")) else {
        tracing::error!("a gRPC client cannot use the address {address}");
        return;
    };
    let cycle: Vec<(Endpoint, &str, u64)> = tags
        .iter()
        .flat_map(|tag| {
            [
                (Endpoint::GrpcSnowflake, "", 1),
                (Endpoint::GrpcSegment, tag.as_str(), 1),
                (Endpoint::GrpcSnowflake, "", 5),
                (Endpoint::GrpcSegment, tag.as_str(), 5),
            ]
        })
        .collect();
    runtime.block_on(async {
        let channel = endpoint
            .connect_timeout(REQUEST_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .connect_lazy();
        let mut client = IdsClient::new(channel);
        let mut i = n * 3;
        while !shared.stop.load(Ordering::Relaxed) {
            let (endpoint, tag, count) = cycle[i % cycle.len()];
            i += 1;
            let sent = mono_ns();
            let answer = if endpoint.is_snowflake() {
                client
                    .next_snowflakes(NextSnowflakesRequest { count })
                    .await
            } else {
                let tag = tag.to_owned();
                client.next_ids(NextIdsRequest { tag, count }).await
            };
            let received = mono_ns();
            let ids: std::result::Result<Vec<u64>, String> = match answer {
                Ok(batch) => Ok(batch
                    .into_inner()
                    .ranges
                    .iter()
                    .flat_map(|r| r.first..=r.last)
                    .collect()),
                // An Unknown status made here from a broken connection (it
                // carries the transport's error) is no answer, not the
                // server's.
                Err(status)
                    if status.code() == tonic::Code::Unknown
                        && std::error::Error::source(&status).is_some() =>
                {
                    Err(NO_ANSWER.to_string())
                }
                Err(status) => Err(format!("gRPC {:?}", status.code())),
            };
            let answered = Answered {
                server,
                endpoint,
                tag,
                sent,
                received,
            };
            if !shared.record(&answered, ids.as_deref().map_err(String::clone)) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(pause).await;
        }
    });
}

/// The IDs of a successful answer to `path`: go-id-alloc's
/// `{"errno":0,"msg":"success","id":N}` (or `"ids":[...]` for a batch),
/// Leaf's `N` as text (or a JSON array for a batch).
fn served_ids(endpoint: Endpoint, path: &str, body: &str) -> Option<Vec<u64>> {
    let batch = path.contains("count=");
    let array = |value: &serde_json::Value| -> Option<Vec<u64>> {
        value
            .as_array()?
            .iter()
            .map(serde_json::Value::as_u64)
            .collect()
    };
    match (endpoint, batch) {
        (Endpoint::Alloc, _) => {
            let value: serde_json::Value = serde_json::from_str(body).ok()?;
            if value.get("errno")?.as_i64()? != 0 {
                return None;
            }
            if batch {
                array(value.get("ids")?)
            } else {
                Some(vec![value.get("id")?.as_u64()?])
            }
        }
        (_, true) => array(&serde_json::from_str(body).ok()?),
        (_, false) => Some(vec![body.trim().parse().ok()?]),
    }
}

/// A library client of server `server` (its gRPC port at `address`) until
/// told to stop: a `Worker` on a lease taken through workerid-client's
/// `ServerStore` in the servers' namespace and pool (`lease`), making
/// snowflake IDs in this process, recorded as the servers' are; it joins
/// again whenever its worker stops or is lost.
pub(crate) fn serve_client_crate(
    shared: &Shared,
    server: usize,
    address: std::net::SocketAddr,
    lease: LeaseOptions,
    namespace: &str,
    pause: Duration,
) {
    let Some(runtime) = thread_runtime("a client-crate worker") else {
        return;
    };
    runtime.block_on(async {
        while !shared.stop.load(Ordering::Relaxed) {
            let connected = ServerStore::builder(format!("http://{address}"))
                .connect_timeout(REQUEST_TIMEOUT)
                .request_timeout(REQUEST_TIMEOUT)
                .connect()
                .await;
            let joined = match connected {
                Ok(store) => match Allocator::new(store, namespace, lease.clone()) {
                    Ok(allocator) => Worker::join(allocator, WorkerOptions::new()).await.ok(),
                    Err(e) => {
                        tracing::error!("a client-crate worker cannot lease in {namespace}: {e}");
                        return;
                    }
                },
                Err(_) => None,
            };
            let Some(worker) = joined else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            while !shared.stop.load(Ordering::Relaxed) {
                let sent = mono_ns();
                let id = worker.next_id();
                let answered = Answered {
                    server,
                    endpoint: Endpoint::ClientCrate,
                    tag: "",
                    sent,
                    received: mono_ns(),
                };
                let id = id.map_err(|e| {
                    format!(
                        "workerid-client {}",
                        workerid::observe::ErrorType::error_type(&e)
                    )
                });
                if !shared.record(
                    &answered,
                    id.as_ref().map(std::slice::from_ref).map_err(String::clone),
                ) {
                    if !matches!(worker.state(), WorkerState::Ready { .. }) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                tokio::time::sleep(pause).await;
            }
            worker.stop().await;
        }
    });
}

/// A current-thread runtime for an observer's thread (`who`, in the error
/// logged when there is none).
pub(crate) fn thread_runtime(who: &str) -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| tracing::error!("{who} cannot start a runtime: {e}"))
        .ok()
}

/// Lists the leases of `namespace` every [`POLL_EVERY`] until told to
/// stop, recording each listing that succeeded with the instants around it.
pub(crate) fn poll_leases(shared: &Shared, url: &str, namespace: &str, max_worker_id: u32) {
    let watched = (url, namespace, max_worker_id);
    poll_listings(
        "the lease poller",
        watched,
        &shared.stop,
        |sent, received, listing| {
            let live = listing.live().map(|l| l.id.get()).collect();
            shared.lock_polls().push(LeasePoll {
                sent,
                received,
                live,
            });
        },
    );
}

/// Lists the leases of `(url, namespace, max_worker_id)` every
/// [`POLL_EVERY`], on this thread, until `stop`; hands each listing that
/// succeeded to `seen` with the instants just before and after it. `who`
/// names the observer in its log.
pub(crate) fn poll_listings(
    who: &str,
    (url, namespace, max_worker_id): (&str, &str, u32),
    stop: &AtomicBool,
    mut seen: impl FnMut(u64, u64, Listing),
) {
    let Some(runtime) = thread_runtime(who) else {
        return;
    };
    runtime.block_on(async {
        let mut allocator = None;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(POLL_EVERY).await;
            let Some(a) = allocator.as_ref() else {
                allocator = open(url, namespace, max_worker_id).await;
                continue;
            };
            let sent = mono_ns();
            let listed = a.list().await;
            let received = mono_ns();
            match listed {
                Ok(listing) => seen(sent, received, listing),
                Err(e) => tracing::debug!("{who}: lease listing failed: {e}"),
            }
        }
    });
}

/// An allocator on `namespace` at `url` for an observer (one connection,
/// short timeouts), or `None` (logged) when the store cannot be opened.
pub(crate) async fn open(url: &str, namespace: &str, max_worker_id: u32) -> Option<Allocator> {
    let store = workerid::OpenOptions::new()
        .connect_timeout(REQUEST_TIMEOUT)
        .request_timeout(REQUEST_TIMEOUT)
        .max_connections(1)
        .open(url)
        .await;
    let store = match store {
        Ok(store) => store,
        Err(e) => {
            tracing::debug!("the lease poller cannot open the store: {e}");
            return None;
        }
    };
    let options = LeaseOptions::new()
        .max_worker_id(max_worker_id)
        .request_timeout(REQUEST_TIMEOUT);
    match Allocator::from_arc(store.lease_store(), namespace, options) {
        Ok(allocator) => Some(allocator),
        Err(e) => {
            tracing::warn!("the lease poller cannot list {namespace}: {e}");
            None
        }
    }
}
