//! What a service run produced, and how it reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::ServiceFault;
use crate::nemesis::NemesisEvent;
use crate::service_check::ServiceReport;
use crate::timeline::Timeline;

/// What a service run produced.
#[derive(Debug)]
pub struct ServiceOutcome {
    /// The seed it ran with.
    pub seed: u64,
    /// The checker's verdict.
    pub report: ServiceReport,
    /// What the nemesis did, in order.
    pub events: Vec<NemesisEvent>,
    /// How many times each fault was injected.
    pub faults: BTreeMap<ServiceFault, usize>,
    /// IDs acknowledged to the clients.
    pub acknowledged: u64,
    /// Requests that failed, by how: `HTTP 503`, `gRPC Unavailable`, `no
    /// answer` (timed out, refused, reset), ...
    pub failures: BTreeMap<String, u64>,
    /// Lease listings done.
    pub polls: usize,
    /// How long the run took.
    pub elapsed: Duration,
    /// The faults and the answered requests over time (see
    /// [`Timeline::svg`]).
    pub timeline: Timeline,
    /// Where the history and logs are.
    pub dir: PathBuf,
}

impl ServiceOutcome {
    /// How many requests failed.
    pub fn failed_requests(&self) -> u64 {
        self.failures.values().sum()
    }

    /// The failures no fault excuses: an error answer whose code says
    /// `internal` (or gives none), a gRPC status other than `Unavailable`,
    /// `ResourceExhausted` and the client's own timeouts (`Cancelled`,
    /// `DeadlineExceeded`), an answer of 200 without IDs. A store that
    /// fails is `store_unavailable` (HTTP 500 on go-id-alloc's and Leaf's
    /// endpoints, as theirs answer) or `Unavailable`.
    pub fn wrong_failures(&self) -> Vec<(&str, u64)> {
        const EXCUSED_GRPC: [&str; 4] = [
            "gRPC Unavailable",
            "gRPC Cancelled",
            "gRPC DeadlineExceeded",
            "gRPC ResourceExhausted",
        ];
        self.failures
            .iter()
            .filter(|(how, _)| {
                let how = how.as_str();
                let http_wrong = how.starts_with("HTTP ")
                    && (how.ends_with(" internal")
                        || how.ends_with("(no code)")
                        || how.starts_with("HTTP 200"));
                let grpc_wrong = how.starts_with("gRPC ") && !EXCUSED_GRPC.contains(&how);
                http_wrong || grpc_wrong
            })
            .map(|(how, n)| (how.as_str(), *n))
            .collect()
    }

    /// A summary: seed, faults, figures, the report.
    pub fn summary(&self) -> String {
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(f, n)| format!("{f:?} x{n}"))
            .collect();
        let failures: Vec<String> = self
            .failures
            .iter()
            .map(|(how, n)| format!("{how} x{n}"))
            .collect();
        format!(
            "seed {} (replay: WORKERID_FAULTS_SEED={}); {:.0} s; faults: {}; {} IDs acknowledged, \
             {} requests failed ({}), {} lease listings; history in {}\n{}",
            self.seed,
            self.seed,
            self.elapsed.as_secs_f64(),
            faults.join(", "),
            self.acknowledged,
            self.failed_requests(),
            failures.join(", "),
            self.polls,
            self.dir.display(),
            self.report
        )
    }
}
