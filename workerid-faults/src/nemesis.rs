//! The controller: starts client processes against a store, injects faults
//! from a seeded schedule, then checks the histories.
//!
//! The seed picks every choice the controller makes (which fault, when, on
//! whom, for how long); `RunConfig::seed` replays them. The operating system
//! still schedules the processes, so a replay repeats the faults, not every
//! interleaving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use workerid::snowflake::Layout;

use crate::checker::{check, CheckOptions};
use crate::clock::mono_ns;
pub use crate::fault::Fault;
use crate::history::read_dir;
use crate::network::{GrantWatcher, Heal, Labs};
pub use crate::outcome::RunOutcome;
use crate::run_end::EndKeeper;
use crate::targets::Target;
use crate::timeline::{FaultWindow, Timeline, Touched};

mod inject;
mod processes;
mod recovered;
use crate::{io_error, FaultsError, Result};

/// How a run goes.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Clients running at any time.
    pub clients: usize,
    /// How many of them are deliberately unsafe (the checker's teeth).
    pub unsafe_clients: usize,
    /// How long faults go on, at least: the run goes on until every fault
    /// was injected once (and its clients issued again), up to three times
    /// this long; then clients stop by themselves.
    pub duration: Duration,
    /// Seeds every choice; print it, pass it again to replay.
    pub seed: u64,
    /// The lease ttl (etcd: whole seconds, at least 2 s).
    pub ttl: Duration,
    /// The pool is `0..2^worker_bits`.
    pub worker_bits: u8,
    /// The faults to inject: each once first (in a seeded order, at twice
    /// the pace), then at random.
    pub faults: Vec<Fault>,
    /// The mean time between two faults (each gap is 0.5 to 1.5 times it,
    /// from the end of one to the start of the next; after a heal the next
    /// fault also waits until the healed clients issued again, or the
    /// recovery bound and a second more passed).
    pub fault_every: Duration,
    /// The chance that a client session ends in a crash (exit or abort
    /// without releasing) rather than a graceful stop.
    pub crash_chance: f64,
    /// How far a clock step goes, in milliseconds.
    pub clock_step_ms: i64,
    /// Wall clock offsets stay within plus or minus this.
    pub max_offset_ms: i64,
    /// The `workerid-faults-client` program.
    pub client_bin: PathBuf,
    /// Clients make IDs on a
    /// [`TickingClock`](workerid::snowflake::TickingClock) over their fault
    /// clock: the checker then holds them to the rule that clock keeps, fail closed by
    /// timestamp, instead of by real time.
    pub ticking: bool,
    /// The clients' clock rates, in parts per million off (negative:
    /// slow), given to the clients in turn (client n gets entry n modulo
    /// the length); empty: every clock keeps time. See
    /// [`FaultClock::with_rate_ppm`](crate::clock::FaultClock::with_rate_ppm).
    pub clock_rates_ppm: Vec<i64>,
    /// The shortest a network fault lasts (default zero: from half a ttl
    /// to three, at random).
    pub network_faults_at_least: Duration,
    /// Clients live in network namespaces and reach the store over a link
    /// that [`Fault::NETWORK`] faults break (needs root; see
    /// [`network`](crate::network)).
    pub network: bool,
    /// Where histories and logs go (kept); a temporary directory if `None`.
    pub dir: Option<PathBuf>,
}

impl RunConfig {
    /// Defaults for a short run: 5 clients on a pool of 4 (2 worker bits),
    /// ttl 2 s, a fault every 2 s for 30 s, every client fault.
    pub fn new(client_bin: impl Into<PathBuf>, seed: u64) -> RunConfig {
        RunConfig {
            clients: 5,
            unsafe_clients: 0,
            duration: Duration::from_secs(30),
            seed,
            ttl: Duration::from_secs(2),
            worker_bits: 2,
            faults: Fault::CLIENT.to_vec(),
            fault_every: Duration::from_secs(2),
            crash_chance: 0.3,
            clock_step_ms: 1_500,
            max_offset_ms: 3_000,
            client_bin: client_bin.into(),
            ticking: false,
            clock_rates_ppm: Vec::new(),
            network_faults_at_least: Duration::ZERO,
            network: false,
            dir: None,
        }
    }

    /// How soon after a heal every client must issue again
    /// ([`recovery::bound`](crate::recovery::bound) of the ttl).
    pub fn recovery_bound(&self) -> Duration {
        crate::recovery::bound(self.ttl)
    }
}

/// A seed from the environment variable `WORKERID_FAULTS_SEED` when set,
/// else from the time: what tests use, so a failure can be replayed.
pub fn seed_from_env() -> u64 {
    std::env::var("WORKERID_FAULTS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
                ^ u64::from(std::process::id())
        })
}

/// One thing the nemesis did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NemesisEvent {
    /// When (`CLOCK_MONOTONIC` ns).
    pub at: u64,
    /// What.
    pub what: String,
}

impl NemesisEvent {
    /// The event `what`, now, appended to `dir/nemesis.log` as it happens
    /// (a run that dies keeps what its nemesis did).
    pub(crate) fn logged(dir: &Path, what: String) -> NemesisEvent {
        let at = mono_ns();
        let line = format!("{at} {what}\n");
        let path = dir.join("nemesis.log");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Err(e) = written {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
        NemesisEvent { at, what }
    }
}

struct Client {
    name: String,
    child: Child,
    unsafe_mode: bool,
    /// The network lab it runs in, in a run with labs.
    lab: Option<usize>,
    /// Its clock runs at the wrong rate.
    off_rate: bool,
    paused_until: Option<u64>,
    offset_ms: i64,
}

struct Controller<'a> {
    target: &'a Target,
    config: &'a RunConfig,
    rng: StdRng,
    dir: PathBuf,
    end: EndKeeper,
    next: usize,
    clients: Vec<Client>,
    events: Vec<NemesisEvent>,
    client_errors: Vec<String>,
    restarts: Vec<u64>,
    labs: Option<Labs>,
    heals: Vec<Heal>,
    /// Every fault injected, from its start to its end.
    windows: Vec<FaultWindow>,
}

/// Runs clients against `target` with faults, then checks their histories.
///
/// # Errors
/// [`FaultsError::Spawn`] when a client cannot start; [`FaultsError::Io`]
/// and [`FaultsError::BadHistory`] for the histories; [`FaultsError::Config`]
/// for a fault the target cannot take.
pub fn run(target: &Target, config: &RunConfig) -> Result<RunOutcome> {
    let labs = config
        .network
        .then(|| Labs::new(target, crate::network::LABS))
        .transpose()?
        .map(|labs| labs.lasting_at_least(config.network_faults_at_least));
    let watcher = labs.as_ref().map(|_| {
        let max = (1u32 << config.worker_bits) - 1;
        GrantWatcher::start(target.url(), namespace(config.seed), max)
    });
    for fault in &config.faults {
        // The leader's clients cut off with it need labs, and members apart.
        let with_clients = *fault == Fault::IsolateEtcdLeaderWithClients
            && target.server_faults().contains(&Fault::IsolateEtcdLeader);
        let network = labs.is_some() && (Fault::NETWORK.contains(fault) || with_clients);
        if !network && !Fault::CLIENT.contains(fault) && !target.server_faults().contains(fault) {
            return Err(FaultsError::Config(format!(
                "{} cannot take the fault {fault:?}",
                target.name()
            )));
        }
    }
    let (dir, temp) = run_dir(config.dir.as_deref())?;
    let start = mono_ns();
    let planned = nanos(config.duration);
    let end = EndKeeper::start(
        &dir.join(END_FILE),
        start + planned,
        END_AHEAD,
        start.saturating_add(planned.saturating_mul(3)),
    )?;
    let mut c = Controller {
        target,
        config,
        rng: StdRng::seed_from_u64(config.seed),
        dir: dir.clone(),
        end,
        next: 0,
        clients: Vec::new(),
        events: Vec::new(),
        client_errors: Vec::new(),
        restarts: Vec::new(),
        labs,
        heals: Vec::new(),
        windows: Vec::new(),
    };
    tracing::info!(
        seed = config.seed,
        store = target.name(),
        "fault run starts"
    );
    // Unsafe clients first, then those whose clocks run at the wrong rate
    // (the leading ones), each holding its worker ID before the others
    // start, so that the nemesis surely has one of them to freeze or cut off.
    let unsafe_ones = config.unsafe_clients.min(config.clients);
    let mut leading = unsafe_ones;
    while leading < config.clients && rate_of(&config.clock_rates_ppm, leading).is_some() {
        leading += 1;
    }
    for n in 0..leading {
        // The off-rate ones keep their first lease for the run, as the
        // unsafe ones do.
        c.spawn(n < unsafe_ones, n >= unsafe_ones)?;
    }
    let wait_until = mono_ns() + 20_000_000_000;
    while mono_ns() < wait_until && !c.clients.iter().all(|cl| has_grant(&dir, &cl.name)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in leading..config.clients {
        c.spawn(false, false)?;
    }
    let mut counts: BTreeMap<Fault, usize> = BTreeMap::new();
    let mut first_round = config.faults.clone();
    first_round.sort();
    first_round.shuffle(&mut c.rng);
    first_round.reverse();
    let mut next_fault = start + c.gap();
    if config.faults.is_empty() {
        c.end.finish();
    }
    while mono_ns() < c.end.at() {
        std::thread::sleep(Duration::from_millis(50));
        c.resume_due(false);
        c.reap_and_replace()?;
        if mono_ns() >= next_fault && !config.faults.is_empty() {
            let (fault, in_first_round) = match first_round.pop() {
                Some(f) => (f, true),
                None => (
                    config.faults[c.rng.random_range(0..config.faults.len())],
                    false,
                ),
            };
            let began = mono_ns();
            let (heals_before, issuing) = (c.heals.len(), c.issuing());
            if let Some((ended, touched)) = c.inject(fault) {
                *counts.entry(fault).or_default() += 1;
                c.windows.push(FaultWindow {
                    kind: format!("{fault:?}"),
                    began,
                    ended,
                    touched,
                });
            } else if in_first_round {
                // Nothing to inject it on now (every client paused, say):
                // the round tries it again.
                first_round.push(fault);
            }
            // The first round (every fault once) goes twice as fast. The gap
            // runs from the fault's end, and the next fault also waits for
            // the clients it healed to issue again.
            let gap = c.gap();
            next_fault = mono_ns() + if first_round.is_empty() { gap } else { gap / 2 };
            let healed = c.heals[heals_before..].to_vec();
            c.wait_recovered(&healed, issuing)?;
            if in_first_round && first_round.is_empty() {
                c.first_round_done();
            }
        }
    }
    let until = c.end.finish();
    c.resume_due(true);
    c.wait_all();
    let histories = read_dir(&dir)?;
    let mut options = CheckOptions::new(Layout::classic());
    if target.forgetful() {
        options.forgetful_restarts = c.restarts.clone();
    }
    let report = check(&histories, &options);
    let liveness = crate::network::liveness(
        &histories,
        &c.heals,
        &c.windows,
        |name| name.get(1..)?.parse().ok().map(Labs::of_client),
        config.ttl * 3,
        config.recovery_bound(),
        (1u64 << config.worker_bits) < config.clients as u64,
    );
    if !report.is_safe() {
        // Keep the evidence.
        crate::targets::save_logs(target, &dir);
        if let Some(temp) = temp {
            let _ = temp.keep();
        }
    }
    Ok(RunOutcome {
        seed: config.seed,
        report,
        events: c.events,
        faults: counts,
        client_errors: c.client_errors,
        liveness,
        orphans: watcher
            .map(|w| {
                // The clients' request timeout is the ttl (client.rs).
                let grace = config.ttl + Duration::from_millis(crate::client::RETRY_PAUSE_MS.end);
                w.finish(&histories, &c.windows, until, grace)
            })
            .unwrap_or_default(),
        timeline: Timeline::of_histories(start, mono_ns(), c.windows, &histories),
        dir,
    })
}

/// The clock rate of client `n`: entry `n` of `rates`, in turn; None for
/// one that keeps time.
fn rate_of(rates: &[i64], n: usize) -> Option<i64> {
    rates
        .get(n % rates.len().max(1))
        .copied()
        .filter(|&ppm| ppm != 0)
}

/// The run's directory: the one given, or a temporary one (returned too,
/// so it lives as long as the run).
pub(crate) fn run_dir(dir: Option<&Path>) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
            Ok((dir.to_path_buf(), None))
        }
        None => {
            let temp = tempfile::Builder::new()
                .prefix("workerid-faults-run-")
                .tempdir()
                .map_err(io_error(std::env::temp_dir()))?;
            Ok((temp.path().to_path_buf(), Some(temp)))
        }
    }
}

pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The namespace of a run seeded with `seed`.
fn namespace(seed: u64) -> String {
    format!("faults-{}", seed % 1_000_000_007)
}

/// Whether client `name` has recorded a grant.
fn has_grant(dir: &Path, name: &str) -> bool {
    std::fs::read_to_string(dir.join(format!("{name}.jsonl")))
        .is_ok_and(|text| text.contains("\"t\":\"grant\""))
}

/// The seed of client number `n` of a run seeded with `seed`.
pub(crate) fn client_seed(seed: u64, n: usize) -> u64 {
    seed.wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407_u64.wrapping_mul(n as u64 + 1))
}

/// The file of the run's directory that holds its end (see
/// [`RunEnd`](crate::run_end::RunEnd)).
const END_FILE: &str = "end";

/// While the first round is not done, the run's end stays this far ahead:
/// longer than the keeper's thread can be late, and the run's last stretch
/// once the round is done.
const END_AHEAD: Duration = Duration::from_secs(5);

impl Controller<'_> {
    /// Every fault was injected once: the end stops moving, and the event
    /// log says when the round ended if that was past the planned end.
    fn first_round_done(&mut self) {
        let (planned, end) = (self.end.planned(), self.end.finish());
        if end > planned {
            self.log(format!(
                "first round done past the planned end: the run lasts {:.1} s longer",
                (end - planned) as f64 / 1e9
            ));
        }
    }

    fn gap(&mut self) -> u64 {
        let mean = nanos(self.config.fault_every);
        self.rng.random_range(mean / 2..=mean + mean / 2)
    }

    fn log(&mut self, what: String) {
        tracing::info!("nemesis: {what}");
        self.events.push(NemesisEvent::logged(&self.dir, what));
    }

    fn resume_due(&mut self, all: bool) {
        let now = mono_ns();
        let mut resumed = Vec::new();
        for client in &mut self.clients {
            if client.paused_until.is_some_and(|t| all || t <= now) {
                // Before the signal: the client may act at once.
                let thawed = mono_ns();
                Self::signal(client, libc::SIGCONT);
                client.paused_until = None;
                resumed.push((client.name.clone(), thawed));
            }
        }
        for (name, thawed) in resumed {
            // A fault that blocks the loop (a network one) thaws the
            // client late: its pause's window ends when it thaws.
            let kind = format!("{:?}", Fault::PauseClient);
            let touched = Touched::Client(name.clone());
            let pause = self
                .windows
                .iter_mut()
                .rev()
                .find(|w| w.kind == kind && w.touched == touched);
            if let Some(pause) = pause {
                pause.ended = thawed;
            }
            self.log(format!("SIGCONT {name}"));
        }
    }

    fn pick(&mut self, eligible: impl Fn(&Client) -> bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.clients.len())
            .filter(|&i| self.clients[i].paused_until.is_none() && eligible(&self.clients[i]))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        Some(candidates[self.rng.random_range(0..candidates.len())])
    }
}
