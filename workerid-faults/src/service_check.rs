//! The service checker: a pure function over what HTTP clients received
//! from `workerid-server` processes, what a lease poller saw in the store,
//! and when the nemesis's faults ended.
//!
//! | rule | violation |
//! | --- | --- |
//! | no segment ID of a tag is received twice, across servers, endpoints (`/alloc` and Leaf's), restarts, and go-id-alloc or Leaf servers on the same table | [`ServiceViolation::DuplicateSegmentId`] |
//! | no snowflake ID is received twice | [`ServiceViolation::DuplicateSnowflakeId`] |
//! | the snowflake IDs of a worker ID rise across servers and restarts: an ID received before another was asked for is the smaller | [`ServiceViolation::WentBack`] |
//! | a snowflake ID carries the worker ID of a live lease: the lease poller's listings just before and just after it was served do not both miss it | [`ServiceViolation::NotLive`] |
//! | every server serves a snowflake ID within the recovery bound (ttl + 2 s) after a fault ends; in a pool with fewer worker IDs than servers, as many as it has IDs (the first to serve) | [`ServiceViolation::SlowRecovery`] |
//! | every ID counted as acknowledged is in the history | [`ServiceViolation::Lost`] |
//!
//! Instants are `CLOCK_MONOTONIC` nanoseconds. A lease lives in the store
//! for at least a ttl once granted (unless its holder releases it on
//! SIGTERM, which the nemesis never sends to a server that joined moments
//! ago), so two listings less than a ttl apart that both miss a worker ID
//! prove that no lease of it covered the instants between them.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use workerid::snowflake::Layout;

/// Where an ID came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// go-id-alloc's `/alloc?biz_tag=T` (a segment ID).
    Alloc,
    /// Leaf's `/api/segment/get/{tag}`.
    LeafSegment,
    /// Leaf's `/api/snowflake/get/{key}`.
    LeafSnowflake,
    /// A segment ID a go-id-alloc or Leaf server (modelled) handed out from
    /// the same table ([`crate::peers`]).
    Peer,
    /// gRPC's `workerid.v1.Ids/NextIds` (segment IDs).
    GrpcSegment,
    /// gRPC's `workerid.v1.Ids/NextSnowflakes`.
    GrpcSnowflake,
    /// A snowflake ID a library `Worker` made in the client's process, on a
    /// lease it took through workerid-client from the server (in the
    /// servers' own namespace and pool).
    ClientCrate,
}

impl Endpoint {
    /// Whether it is a snowflake ID (the others are segment IDs).
    pub fn is_snowflake(self) -> bool {
        matches!(
            self,
            Endpoint::LeafSnowflake | Endpoint::GrpcSnowflake | Endpoint::ClientCrate
        )
    }

    /// Whether a server issued it as a snowflake ID (what recoveries are
    /// measured on).
    pub fn served_snowflake(self) -> bool {
        matches!(self, Endpoint::LeafSnowflake | Endpoint::GrpcSnowflake)
    }
}

/// One ID a client received, recorded before it counts as acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The server's index in the fleet.
    pub server: usize,
    /// Which endpoint answered.
    pub endpoint: Endpoint,
    /// The segment tag (empty for snowflake IDs).
    pub tag: String,
    /// The ID.
    pub id: u64,
    /// Just before the request was written.
    pub sent: u64,
    /// Just after the answer was read.
    pub received: u64,
}

/// One listing of the lease namespace by the poller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasePoll {
    /// Just before the listing was asked for.
    pub sent: u64,
    /// Just after it was answered.
    pub received: u64,
    /// The worker IDs with a live lease.
    pub live: Vec<u32>,
}

/// A fault that ended, after which every server must serve again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultEnd {
    /// The fault's kind, for the worst-recovery figures.
    pub kind: String,
    /// When it ended (the process started or thawed again).
    pub at: u64,
    /// The next fault's start (or the run's end): a server that had not
    /// recovered by then is judged only if the bound had already passed.
    pub next: u64,
}

/// What the checker is told besides the IDs.
#[derive(Debug, Clone)]
pub struct ServiceCheckOptions {
    /// The servers' snowflake layout.
    pub layout: Layout,
    /// The lease ttl.
    pub ttl: Duration,
    /// How soon after a fault every server must serve snowflake IDs again.
    pub recovery_bound: Duration,
    /// How many servers.
    pub servers: usize,
    /// How many of them must serve again after each fault (the pool may
    /// have fewer worker IDs than there are servers): the first that many
    /// to serve are judged, the others wait for a worker ID.
    pub serving: usize,
    /// IDs the clients counted as acknowledged.
    pub acknowledged: u64,
}

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceViolation {
    /// A segment ID of `tag` received twice.
    DuplicateSegmentId {
        /// The tag.
        tag: String,
        /// The ID.
        id: u64,
        /// The servers that served it.
        servers: (usize, usize),
    },
    /// A snowflake ID received twice.
    DuplicateSnowflakeId {
        /// The ID.
        id: u64,
        /// The servers that served it.
        servers: (usize, usize),
    },
    /// A snowflake ID below one of its worker ID received before it was
    /// asked for.
    WentBack {
        /// The worker ID.
        worker_id: u32,
        /// The earlier (received first) ID and its server.
        earlier: (u64, usize),
        /// The later, smaller ID and its server.
        later: (u64, usize),
    },
    /// A snowflake ID whose worker ID no listing around it showed live.
    NotLive {
        /// The ID.
        id: u64,
        /// Its worker ID.
        worker_id: u32,
        /// The server.
        server: usize,
    },
    /// A server did not serve a snowflake ID within the bound after a fault.
    SlowRecovery {
        /// The fault's kind.
        kind: String,
        /// The server.
        server: usize,
        /// How long it took (None: not before the next fault or the end).
        took: Option<Duration>,
    },
    /// Fewer IDs in the history than were acknowledged.
    Lost {
        /// Counted as acknowledged.
        acknowledged: u64,
        /// In the history.
        recorded: u64,
    },
}

impl ServiceViolation {
    /// A short name of the rule broken.
    pub fn kind(&self) -> &'static str {
        match self {
            ServiceViolation::DuplicateSegmentId { .. } => "duplicate-segment-id",
            ServiceViolation::DuplicateSnowflakeId { .. } => "duplicate-snowflake-id",
            ServiceViolation::WentBack { .. } => "went-back",
            ServiceViolation::NotLive { .. } => "not-live",
            ServiceViolation::SlowRecovery { .. } => "slow-recovery",
            ServiceViolation::Lost { .. } => "lost",
        }
    }
}

impl fmt::Display for ServiceViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceViolation::DuplicateSegmentId { tag, id, servers } => write!(
                f,
                "segment ID {id} of {tag:?} served twice (servers s{} and s{})",
                servers.0, servers.1
            ),
            ServiceViolation::DuplicateSnowflakeId { id, servers } => write!(
                f,
                "snowflake ID {id} served twice (servers s{} and s{})",
                servers.0, servers.1
            ),
            ServiceViolation::WentBack {
                worker_id,
                earlier,
                later,
            } => write!(
                f,
                "worker ID {worker_id} went back: {} from s{} was received before {} from s{} was asked for",
                earlier.0, earlier.1, later.0, later.1
            ),
            ServiceViolation::NotLive {
                id,
                worker_id,
                server,
            } => write!(
                f,
                "snowflake ID {id} from s{server} carries worker ID {worker_id}, which had no live lease"
            ),
            ServiceViolation::SlowRecovery { kind, server, took } => match took {
                Some(took) => write!(f, "s{server} served again {took:?} after {kind}"),
                None => write!(f, "s{server} never served again after {kind}"),
            },
            ServiceViolation::Lost {
                acknowledged,
                recorded,
            } => write!(
                f,
                "{acknowledged} IDs acknowledged but {recorded} in the history"
            ),
        }
    }
}

/// The checker's verdict.
#[derive(Debug, Clone, Default)]
pub struct ServiceReport {
    /// Segment IDs checked.
    pub segment_ids: usize,
    /// Of them, IDs handed out by go-id-alloc or Leaf servers (modelled) on
    /// the same table.
    pub peer_ids: usize,
    /// Snowflake IDs checked.
    pub snowflake_ids: usize,
    /// Of the segment and snowflake IDs, those served over gRPC.
    pub grpc_ids: usize,
    /// Of the snowflake IDs, those made by library workers on leases taken
    /// through workerid-client.
    pub client_crate_ids: usize,
    /// Snowflake IDs whose liveness could be judged (listings on both sides
    /// less than a ttl apart).
    pub judged_live: usize,
    /// Distinct worker IDs seen, and how many of them more than one server
    /// served (handovers across servers).
    pub worker_ids: usize,
    /// Worker IDs served by more than one server over the run.
    pub shared_worker_ids: usize,
    /// The worst recovery per fault kind (None: a server never recovered).
    pub worst_recovery: BTreeMap<String, Option<Duration>>,
    /// Every violation (the first few hundred of each kind).
    pub violations: Vec<ServiceViolation>,
}

impl ServiceReport {
    /// No violation.
    pub fn is_safe(&self) -> bool {
        self.violations.is_empty()
    }

    /// Violations of `kind` ([`ServiceViolation::kind`]).
    pub fn count(&self, kind: &str) -> usize {
        self.violations.iter().filter(|v| v.kind() == kind).count()
    }
}

impl fmt::Display for ServiceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let peers = if self.peer_ids > 0 {
            format!(" ({} from go-id-alloc or Leaf servers)", self.peer_ids)
        } else {
            String::new()
        };
        writeln!(
            f,
            "{} segment IDs{peers}, {} snowflake IDs ({} judged for liveness; {} IDs over gRPC; {} made through workerid-client), {} worker IDs ({} served by more than one server)",
            self.segment_ids,
            self.snowflake_ids,
            self.judged_live,
            self.grpc_ids,
            self.client_crate_ids,
            self.worker_ids,
            self.shared_worker_ids
        )?;
        for (kind, worst) in &self.worst_recovery {
            match worst {
                Some(d) => writeln!(f, "worst recovery after {kind}: {:.2} s", d.as_secs_f64())?,
                None => writeln!(f, "worst recovery after {kind}: never")?,
            }
        }
        if self.violations.is_empty() {
            return write!(f, "no violation");
        }
        writeln!(f, "{} violations:", self.violations.len())?;
        for v in self.violations.iter().take(50) {
            writeln!(f, "  {v}")?;
        }
        Ok(())
    }
}

/// The most violations of one kind listed (the rest are not: one bug can
/// break a rule thousands of times).
const MAX_PER_KIND: usize = 200;

/// Checks `ids`, `polls` and `faults` against every rule.
pub fn check_service(
    ids: &[Received],
    polls: &[LeasePoll],
    faults: &[FaultEnd],
    options: &ServiceCheckOptions,
) -> ServiceReport {
    let mut report = ServiceReport::default();
    let push = |report: &mut ServiceReport, v: ServiceViolation| {
        if report.count(v.kind()) < MAX_PER_KIND {
            report.violations.push(v);
        }
    };
    let mut segments: HashMap<(&str, u64), usize> = HashMap::new();
    let mut snowflakes: HashMap<u64, usize> = HashMap::new();
    let mut by_worker: HashMap<u32, Vec<&Received>> = HashMap::new();
    for r in ids {
        match r.endpoint {
            Endpoint::GrpcSegment | Endpoint::GrpcSnowflake => report.grpc_ids += 1,
            Endpoint::ClientCrate => report.client_crate_ids += 1,
            _ => {}
        }
        if r.endpoint.is_snowflake() {
            report.snowflake_ids += 1;
            if let Some(&first) = snowflakes.get(&r.id) {
                let servers = (first, r.server);
                push(
                    &mut report,
                    ServiceViolation::DuplicateSnowflakeId { id: r.id, servers },
                );
            } else {
                snowflakes.insert(r.id, r.server);
            }
            let worker_id = options.layout.decompose(r.id).worker_id;
            by_worker.entry(worker_id).or_default().push(r);
        } else {
            report.segment_ids += 1;
            if r.endpoint == Endpoint::Peer {
                report.peer_ids += 1;
            }
            if let Some(&first) = segments.get(&(r.tag.as_str(), r.id)) {
                let v = ServiceViolation::DuplicateSegmentId {
                    tag: r.tag.clone(),
                    id: r.id,
                    servers: (first, r.server),
                };
                push(&mut report, v);
            } else {
                segments.insert((r.tag.as_str(), r.id), r.server);
            }
        }
    }
    report.worker_ids = by_worker.len();
    for (&worker_id, served) in &by_worker {
        let first = served[0].server;
        if served.iter().any(|r| r.server != first) {
            report.shared_worker_ids += 1;
        }
        for v in went_back(worker_id, served) {
            push(&mut report, v);
        }
    }
    let ttl = crate::nemesis::nanos(options.ttl);
    for r in ids.iter().filter(|r| r.endpoint.is_snowflake()) {
        let worker_id = options.layout.decompose(r.id).worker_id;
        match live_around(polls, r, worker_id, ttl) {
            Liveness::Unjudged => {}
            Liveness::Live => report.judged_live += 1,
            Liveness::NotLive => {
                report.judged_live += 1;
                let v = ServiceViolation::NotLive {
                    id: r.id,
                    worker_id,
                    server: r.server,
                };
                push(&mut report, v);
            }
        }
    }
    for v in recoveries(ids, faults, options, &mut report.worst_recovery) {
        push(&mut report, v);
    }
    let recorded = ids.len() as u64;
    if recorded < options.acknowledged {
        let v = ServiceViolation::Lost {
            acknowledged: options.acknowledged,
            recorded,
        };
        push(&mut report, v);
    }
    report
}

/// The IDs of one worker ID that went back: for each ID in the order they
/// were asked for, the largest ID received before it was asked for must be
/// smaller.
fn went_back(worker_id: u32, served: &[&Received]) -> Vec<ServiceViolation> {
    let mut by_sent: Vec<&Received> = served.to_vec();
    by_sent.sort_by_key(|r| r.sent);
    let mut by_received: Vec<&Received> = served.to_vec();
    by_received.sort_by_key(|r| r.received);
    let mut violations = Vec::new();
    let mut before: Option<&Received> = None;
    let mut next = 0;
    for r in by_sent {
        while next < by_received.len() && by_received[next].received < r.sent {
            let candidate = by_received[next];
            if before.is_none_or(|b| candidate.id > b.id) {
                before = Some(candidate);
            }
            next += 1;
        }
        if let Some(b) = before.filter(|b| b.id > r.id) {
            violations.push(ServiceViolation::WentBack {
                worker_id,
                earlier: (b.id, b.server),
                later: (r.id, r.server),
            });
        }
    }
    violations
}

enum Liveness {
    Unjudged,
    Live,
    NotLive,
}

/// Whether `worker_id` had a live lease when `r` was served, as far as the
/// listings tell: the last listing done before `r` was asked for, the first
/// begun after it was answered, and any between them.
fn live_around(polls: &[LeasePoll], r: &Received, worker_id: u32, ttl: u64) -> Liveness {
    let after = polls.partition_point(|p| p.sent <= r.received);
    let Some(last) = polls.get(after) else {
        return Liveness::Unjudged;
    };
    let before = polls[..after].partition_point(|p| p.received < r.sent);
    let Some(first) = before.checked_sub(1).map(|i| &polls[i]) else {
        return Liveness::Unjudged;
    };
    let around = &polls[before - 1..=after];
    if around.iter().any(|p| p.live.contains(&worker_id)) {
        return Liveness::Live;
    }
    if last.received.saturating_sub(first.sent) < ttl {
        Liveness::NotLive
    } else {
        Liveness::Unjudged
    }
}

/// For every fault end and server: how long until the server answered a
/// snowflake request sent after the end.
fn recoveries(
    ids: &[Received],
    faults: &[FaultEnd],
    options: &ServiceCheckOptions,
    worst: &mut BTreeMap<String, Option<Duration>>,
) -> Vec<ServiceViolation> {
    let mut by_server: Vec<Vec<&Received>> = vec![Vec::new(); options.servers];
    for r in ids.iter().filter(|r| r.endpoint.served_snowflake()) {
        if let Some(list) = by_server.get_mut(r.server) {
            list.push(r);
        }
    }
    for list in &mut by_server {
        list.sort_by_key(|r| r.sent);
    }
    let mut violations = Vec::new();
    for fault in faults {
        let mut tooks: Vec<(Option<u64>, usize)> = by_server
            .iter()
            .enumerate()
            .map(|(server, list)| {
                let start = list.partition_point(|r| r.sent < fault.at);
                (
                    list[start..].iter().map(|r| r.received - fault.at).min(),
                    server,
                )
            })
            .collect();
        // The first to serve again (never: last) are judged.
        tooks.sort_by_key(|&(took, server)| (took.is_none(), took, server));
        for (took, server) in tooks.into_iter().take(options.serving) {
            let next = Duration::from_nanos(fault.next.saturating_sub(fault.at));
            let judged = crate::recovery::judged(
                took.map(Duration::from_nanos),
                Some(next),
                options.recovery_bound,
            );
            if !judged {
                continue;
            }
            let took = took.map(Duration::from_nanos);
            let entry = worst
                .entry(fault.kind.clone())
                .or_insert(Some(Duration::ZERO));
            *entry = match (*entry, took) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
            if took.is_none_or(|t| t > options.recovery_bound) {
                violations.push(ServiceViolation::SlowRecovery {
                    kind: fault.kind.clone(),
                    server,
                    took,
                });
            }
        }
    }
    violations
}

#[cfg(test)]
#[path = "service_check_tests.rs"]
mod tests;
