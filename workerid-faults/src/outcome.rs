//! What a run produced.

use crate::timeline::Timeline;
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::checker::Report;
use crate::nemesis::{Fault, NemesisEvent};
use crate::network::{Orphan, Recovery};

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// The seed it ran with.
    pub seed: u64,
    /// The checker's verdict.
    pub report: Report,
    /// What the nemesis did, in order.
    pub events: Vec<NemesisEvent>,
    /// How many times each fault was injected.
    pub faults: BTreeMap<Fault, usize>,
    /// Client processes that failed in a way no fault explains (an error
    /// exit), with the end of their log.
    pub client_errors: Vec<String>,
    /// A network run: after each heal, how long each client of the healed
    /// lab took to issue IDs again.
    pub liveness: Vec<Recovery>,
    /// A network run: every live lease seen in the store that no client
    /// received (an orphan grant).
    pub orphans: Vec<Orphan>,
    /// The faults and the IDs issued over time (see [`Timeline::svg`]).
    pub timeline: Timeline,
    /// Where the histories are.
    pub dir: PathBuf,
}

impl RunOutcome {
    /// A network run's recoveries that missed the bound (ttl + 2 s): a
    /// client that issued nothing that long after a heal while no other
    /// fault came first.
    pub fn slow_recoveries(&self) -> Vec<&Recovery> {
        self.liveness.iter().filter(|r| r.slow).collect()
    }

    /// A summary: seed, faults, the report.
    pub fn summary(&self) -> String {
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(f, n)| format!("{f:?} x{n}"))
            .collect();
        let liveness = if self.liveness.is_empty() {
            String::new()
        } else {
            format!(
                "\n{}\n{}",
                crate::network::summarize(&self.liveness),
                crate::network::summarize_orphans(&self.orphans)
            )
        };
        format!(
            "seed {} (replay: WORKERID_FAULTS_SEED={}); faults: {}; histories in {} \
             (a temporary one is removed unless a violation was found)\n{}{liveness}",
            self.seed,
            self.seed,
            faults.join(", "),
            self.dir.display(),
            self.report
        )
    }
}
