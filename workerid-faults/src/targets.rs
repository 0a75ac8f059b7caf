//! The store a run targets: one the harness (`workerid-testkit`) started,
//! and the server faults the nemesis applies to it.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use std::net::SocketAddr;

use workerid_testkit::etcd::{EtcdCluster, EtcdNode};
use workerid_testkit::failing_disk::{FailingDisk, Failure};
use workerid_testkit::fsync_failing::FsyncFailures;
use workerid_testkit::small_disk::SmallDisk;
pub use workerid_testkit::StoreKind;
use workerid_testkit::{RunningStore, ServerProcess, Servers};

use crate::clock::mono_ns;
use crate::nemesis::Fault;
use crate::network::Labs;
use crate::{FaultsError, Result};

/// What a server fault did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// For the run's log.
    pub what: String,
    /// When a server of the store was killed (SIGKILL), if one was.
    pub killed_at: Option<u64>,
    /// When the fault ended: the killed server was started again (before
    /// it answered), or the frozen one thawed.
    pub ended: u64,
}

/// A store under test: one the harness started, that the nemesis may kill
/// and start again on the same data, or freeze.
#[derive(Debug)]
pub struct Target {
    running: RunningStore,
    /// The disk the store's data is on, if it was started on one of its
    /// own (dropped after the store: its servers stop before it is
    /// unmounted).
    disk: Option<Disk>,
}

/// A disk of the store's own.
#[derive(Debug)]
enum Disk {
    /// One that fills up ([`Fault::FillStoreDisk`]).
    Small(SmallDisk),
    /// One that fails ([`Fault::FailStoreDisk`]), or whose `fsync` fails
    /// ([`Fault::FailStoreFsync`]).
    Failing(FailingDisk),
}

impl Target {
    /// Starts a store of `kind` (not [`StoreKind::Memory`]: see
    /// [`inprocess`](crate::inprocess)).
    ///
    /// # Errors
    /// [`FaultsError::Config`] for the memory store, whose clients are
    /// threads of one process.
    pub fn start(kind: StoreKind) -> Result<Target> {
        if kind == StoreKind::Memory {
            return Err(FaultsError::Config(
                "the memory store runs in process (inprocess::run)".into(),
            ));
        }
        Ok(Target {
            running: kind.start(),
            disk: None,
        })
    }

    /// Starts a 3-member etcd cluster whose members run apart, each in a
    /// network namespace of its own (needs root), so that the nemesis can
    /// cut the leader from the others ([`Fault::IsolateEtcdLeader`]).
    pub fn start_etcd_cluster_apart() -> Target {
        Target {
            running: RunningStore::etcd_cluster_apart(),
            disk: None,
        }
    }

    /// Starts a store of `kind` whose data is on a small disk of its own (a
    /// size-limited tmpfs, [`SmallDisk::for_store`]; needs root), so that the
    /// nemesis can fill it up ([`Fault::FillStoreDisk`]).
    ///
    /// # Errors
    /// [`FaultsError::Config`] for the memory store and Redis without
    /// persistence, which write nothing to a disk.
    pub fn start_on_small_disk(kind: StoreKind) -> Result<Target> {
        if matches!(
            kind,
            StoreKind::Memory | StoreKind::Redis | StoreKind::RedisCluster
        ) {
            return Err(FaultsError::Config(format!(
                "{} keeps nothing on a disk: no disk to fill",
                kind.name()
            )));
        }
        let disk = SmallDisk::for_store(kind);
        Ok(Target {
            running: disk.start(kind),
            disk: Some(Disk::Small(disk)),
        })
    }

    /// Starts a store of `kind` whose servers keep their data on a disk of
    /// their own that can fail (ext4 on a loop device,
    /// [`FailingDisk::for_store`]; needs root), so that the nemesis can make
    /// it fail ([`Fault::FailStoreDisk`]).
    ///
    /// # Errors
    /// [`FaultsError::Config`] for the memory store and Redis without
    /// persistence, which write nothing to a disk, and for SQLite, whose
    /// file its clients open themselves: mounting the disk again after it
    /// failed needs every file on it closed, which only stopping the
    /// clients would do.
    pub fn start_on_failing_disk(kind: StoreKind) -> Result<Target> {
        if matches!(
            kind,
            StoreKind::Memory | StoreKind::Redis | StoreKind::RedisCluster | StoreKind::Sqlite
        ) {
            return Err(FaultsError::Config(format!(
                "{}: no server of its own keeps its data on a disk to fail (SQLite's \
                 clients open its file themselves; tests/disk_failing.rs fails its disk)",
                kind.name()
            )));
        }
        let disk = FailingDisk::for_store(kind);
        Ok(Target {
            running: disk.start(kind),
            disk: Some(Disk::Failing(disk)),
        })
    }

    /// Starts a store of `kind` whose data is on a disk whose every `fsync`
    /// can be made to fail for a while under a file system that stays
    /// writable ([`Failure::Intermittent`], a FUSE file system; needs root
    /// and `/dev/fuse`), so that the nemesis can make it fail
    /// ([`Fault::FailStoreFsync`]). SQLite may be: the disk is never
    /// mounted again under its clients.
    ///
    /// # Errors
    /// [`FaultsError::Config`] for the memory store and Redis without
    /// persistence, which write nothing to a disk.
    pub fn start_on_fsync_failing_disk(kind: StoreKind) -> Result<Target> {
        if matches!(
            kind,
            StoreKind::Memory | StoreKind::Redis | StoreKind::RedisCluster
        ) {
            return Err(FaultsError::Config(format!(
                "{} keeps nothing on a disk: no fsync to fail",
                kind.name()
            )));
        }
        let disk = FailingDisk::for_store_failing_as(kind, Failure::Intermittent);
        Ok(Target {
            running: disk.start(kind),
            disk: Some(Disk::Failing(disk)),
        })
    }

    /// What the failing `fsync`s of a store started by
    /// [`start_on_fsync_failing_disk`](Self::start_on_fsync_failing_disk)
    /// did so far; `None` for any other store.
    pub fn fsync_failures(&self) -> Option<FsyncFailures> {
        match &self.disk {
            Some(Disk::Failing(disk)) => disk.fsync_failures(),
            _ => None,
        }
    }

    /// A short name (`"redis-durable"`, `"etcd-cluster"`, ...).
    pub fn name(&self) -> &'static str {
        self.running.kind().name()
    }

    /// The URL clients open it with (`workerid::open`).
    pub fn url(&self) -> String {
        self.running.url()
    }

    /// The server faults it can undergo.
    pub fn server_faults(&self) -> Vec<Fault> {
        let mut faults = self.process_faults();
        match self.disk {
            Some(Disk::Small(_)) => faults.push(Fault::FillStoreDisk),
            Some(Disk::Failing(ref disk)) if disk.failure() == Failure::Intermittent => {
                faults.push(Fault::FailStoreFsync)
            }
            Some(Disk::Failing(_)) => faults.push(Fault::FailStoreDisk),
            None => {}
        }
        faults
    }

    fn process_faults(&self) -> Vec<Fault> {
        match self.running.servers() {
            Servers::None | Servers::SqliteFile(_) => Vec::new(),
            Servers::EtcdCluster(cluster) => {
                let mut faults = vec![
                    Fault::KillEtcdLeader,
                    Fault::KillEtcdFollower,
                    Fault::PauseStore,
                    Fault::PauseEtcdLeader,
                ];
                if cluster.is_apart() {
                    faults.push(Fault::IsolateEtcdLeader);
                }
                faults
            }
            _ => vec![Fault::RestartStore, Fault::PauseStore],
        }
    }

    /// Applies a server fault: kills a server, waits a little, starts it
    /// again on the same data and waits until it answers; or freezes it
    /// (SIGSTOP) for 1.5 to 2.5 times `ttl` and thaws it.
    pub fn apply(&self, fault: Fault, rng: &mut StdRng, ttl: Duration) -> Applied {
        match (fault, &self.disk) {
            (Fault::FillStoreDisk, Some(Disk::Small(disk))) => {
                return fill_disk(disk, &self.running.processes(), rng, ttl);
            }
            (Fault::FailStoreDisk | Fault::FailStoreFsync, Some(Disk::Failing(disk)))
                if (fault == Fault::FailStoreFsync)
                    == (disk.failure() == Failure::Intermittent) =>
            {
                return fail_disk(disk, &self.running.processes(), rng, ttl);
            }
            (Fault::FillStoreDisk | Fault::FailStoreDisk | Fault::FailStoreFsync, _) => {
                return Applied {
                    what: format!("{fault:?}: the store is not on such a disk"),
                    killed_at: None,
                    ended: mono_ns(),
                };
            }
            _ => {}
        }
        if let Servers::EtcdCluster(cluster) = self.running.servers() {
            return etcd_member_fault(cluster, fault, rng, ttl);
        }
        let processes = self.running.processes();
        let Some((name, process)) = processes.first() else {
            return Applied {
                what: format!("{fault:?}: no server"),
                killed_at: None,
                ended: mono_ns(),
            };
        };
        match fault {
            Fault::PauseStore => freeze(process, rng, ttl, name),
            _ => crash_and_restart(process, rng, name),
        }
    }

    /// Cuts the etcd leader from the other members, and every lab of
    /// `labs` from those members as well, for 1.5 to 3 ttls
    /// ([`Fault::IsolateEtcdLeaderWithClients`]).
    pub fn isolate_etcd_leader_with_clients(
        &self,
        labs: &Labs,
        rng: &mut StdRng,
        ttl: Duration,
    ) -> Applied {
        let leader = match self.running.servers() {
            Servers::EtcdCluster(cluster) if cluster.is_apart() => {
                cluster.leader().map(|leader| (cluster, leader))
            }
            _ => None,
        };
        match leader {
            Some((cluster, leader)) => isolate(cluster, leader, rng, ttl, Some(labs)),
            None => Applied {
                what: "IsolateEtcdLeaderWithClients: no etcd cluster apart, or no leader now"
                    .into(),
                killed_at: None,
                ended: mono_ns(),
            },
        }
    }

    /// Whether a restart forgets every lease (Redis without persistence).
    pub fn forgetful(&self) -> bool {
        matches!(
            self.running.kind(),
            StoreKind::Redis | StoreKind::RedisCluster
        )
    }

    /// The servers' processes, named, whose logs a failed run keeps.
    pub fn processes(&self) -> Vec<(String, &ServerProcess)> {
        self.running.processes()
    }
}

/// Copies the end of every server log of `target` into `dir` (evidence of
/// a failed run; the servers' own directories go away with them).
pub fn save_logs(target: &Target, dir: &std::path::Path) {
    for (name, process) in target.processes() {
        let path = dir.join(format!("server-{name}.log"));
        if let Err(e) = std::fs::write(&path, process.log_tail(5_000)) {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
    }
}

/// Kills `process` (SIGKILL to its process group), waits a little and
/// starts it again on the same data.
pub(crate) fn crash_and_restart(process: &ServerProcess, rng: &mut StdRng, name: &str) -> Applied {
    let killed_at = mono_ns();
    process.kill();
    let down = Duration::from_millis(rng.random_range(200..1_500));
    std::thread::sleep(down);
    let ended = mono_ns();
    process.start();
    Applied {
        what: format!(
            "kill -9 {name}, down {down:?}, started again in {:.1} s",
            (mono_ns() - killed_at) as f64 / 1e9
        ),
        killed_at: Some(killed_at),
        ended,
    }
}

/// Freezes `process` (SIGSTOP to every process of it) for 1.5 to 2.5 ttls,
/// then thaws it: to its clients, a network partition (requests hang until
/// they time out), after which the server answers again.
pub(crate) fn freeze(
    process: &ServerProcess,
    rng: &mut StdRng,
    ttl: Duration,
    name: &str,
) -> Applied {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let pause = Duration::from_millis(rng.random_range(ttl_ms * 3 / 2..=ttl_ms * 5 / 2));
    process.pause();
    std::thread::sleep(pause);
    process.resume();
    Applied {
        what: format!("SIGSTOP {name} for {pause:?}, then SIGCONT"),
        killed_at: None,
        ended: mono_ns(),
    }
}

/// Fills `disk` for one to three ttls, then empties it and starts again
/// every server of the store that exited for want of space (Redis and etcd
/// do when an append fails), as its supervisor would, on the same data.
fn fill_disk(
    disk: &SmallDisk,
    processes: &[(String, &ServerProcess)],
    rng: &mut StdRng,
    ttl: Duration,
) -> Applied {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let full = Duration::from_millis(rng.random_range(ttl_ms..=ttl_ms * 3));
    let filled = disk.fill();
    std::thread::sleep(full);
    disk.free();
    let ended = mono_ns();
    let mut restarted = Vec::new();
    for (name, process) in processes {
        if !process.is_running() {
            process.start();
            restarted.push(name.as_str());
        }
    }
    let restarted = if restarted.is_empty() {
        String::new()
    } else {
        format!("; started again: {}", restarted.join(", "))
    };
    Applied {
        what: format!(
            "fill the store's disk ({} MiB of filler) for {full:?}, then free it{restarted}",
            filled >> 20
        ),
        killed_at: None,
        ended,
    }
}

/// Makes `disk` fail as its [`Failure`] says for one to three ttls; then,
/// as an operator would, stops every server still running and starts them
/// again on what the disk holds:
///
/// - a disk shut down is mounted again (its journal replayed);
/// - a disk whose `fsync` failed stays mounted: the errors end and the
///   pages they lost are dropped, since a server must not start on pages
///   the disk never stored (docs/guarantees.md). A server that did not
///   exit is started again too: PostgreSQL's crash recovery, begun while
///   the errors last, gives up later on the error each file it opened is
///   told of once more. A store without servers (SQLite, whose clients
///   hold its file) goes on without a drop.
fn fail_disk(
    disk: &FailingDisk,
    processes: &[(String, &ServerProcess)],
    rng: &mut StdRng,
    ttl: Duration,
) -> Applied {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let failed_for = Duration::from_millis(rng.random_range(ttl_ms..=ttl_ms * 3));
    let failed_at = mono_ns();
    let before = disk.fsync_failures().unwrap_or_default();
    disk.fail();
    std::thread::sleep(failed_for);
    let exited: Vec<&str> = processes
        .iter()
        .filter(|(_, p)| !p.is_running())
        .map(|(name, _)| name.as_str())
        .collect();
    for (_, process) in processes {
        process.kill();
    }
    let (failure, back) = if disk.failure() == Failure::Intermittent {
        disk.heal();
        // Not under clients that hold the store's files themselves
        // (SQLite's): their own caches would no longer match the files.
        if !processes.is_empty() {
            disk.drop_page_cache();
        }
        let after = disk.fsync_failures().unwrap_or_default();
        (
            format!(
                "fail every fsync on the store's disk for {failed_for:?} ({} failed, {} pages \
                 lost)",
                after.fsyncs_failed - before.fsyncs_failed,
                after.pages_lost - before.pages_lost
            ),
            "end the errors, drop the lost pages",
        )
    } else {
        disk.recover();
        (
            format!("fail the store's disk (EIO) for {failed_for:?}"),
            "mount it again",
        )
    };
    let ended = mono_ns();
    for (_, process) in processes {
        process.start();
    }
    Applied {
        what: format!(
            "{failure}; exited by themselves: {}; stop its servers, {back} and start them: \
             back in {:.1} s",
            if exited.is_empty() {
                "none".to_string()
            } else {
                exited.join(", ")
            },
            (mono_ns() - failed_at) as f64 / 1e9
        ),
        killed_at: Some(failed_at),
        ended,
    }
}

/// Cuts `leader` from the other members of `cluster` for 1.5 to 3 ttls
/// (and, with `clients`, every lab from those members too), then heals.
fn isolate(
    cluster: &EtcdCluster,
    leader: &EtcdNode,
    rng: &mut StdRng,
    ttl: Duration,
    clients: Option<&Labs>,
) -> Applied {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let cut = Duration::from_millis(rng.random_range(ttl_ms * 3 / 2..=ttl_ms * 3));
    cluster.isolate(leader.name());
    if let Some(labs) = clients {
        let majority: Vec<SocketAddr> = cluster
            .nodes()
            .iter()
            .filter(|n| n.name() != leader.name())
            .map(EtcdNode::client_address)
            .collect();
        labs.cut_from_servers(&majority);
    }
    std::thread::sleep(cut);
    cluster.heal();
    if let Some(labs) = clients {
        labs.heal_all();
    }
    let ended = mono_ns();
    cluster.wait_healthy(Duration::from_secs(60));
    let after = cluster.leader().map_or("none", |l| l.name());
    let with = if clients.is_some() {
        ", and every client from those two"
    } else {
        ""
    };
    Applied {
        what: format!(
            "cut etcd member {} (the leader) from the other two{with} for {cut:?}; the leader \
             after the heal: {after}",
            leader.name()
        ),
        killed_at: None,
        ended,
    }
}

/// Kills or freezes one member of a 3-member etcd cluster: the leader or a
/// follower, as `fault` says; the other two keep a quorum.
fn etcd_member_fault(
    cluster: &EtcdCluster,
    fault: Fault,
    rng: &mut StdRng,
    ttl: Duration,
) -> Applied {
    let node = match fault {
        Fault::KillEtcdLeader | Fault::PauseEtcdLeader | Fault::IsolateEtcdLeader => {
            cluster.leader()
        }
        _ => {
            let followers: Vec<_> = cluster
                .nodes()
                .iter()
                .filter(|n| n.process().is_running() && !n.is_leader())
                .collect();
            if followers.is_empty() {
                None
            } else {
                Some(followers[rng.random_range(0..followers.len())])
            }
        }
    };
    let Some(node) = node else {
        return Applied {
            what: format!("{fault:?}: no such member now"),
            killed_at: None,
            ended: mono_ns(),
        };
    };
    if fault == Fault::IsolateEtcdLeader {
        return isolate(cluster, node, rng, ttl, None);
    }
    if matches!(fault, Fault::PauseStore | Fault::PauseEtcdLeader) {
        let role = if fault == Fault::PauseStore {
            "a follower"
        } else {
            "the leader"
        };
        let name = format!("etcd member {} ({role})", node.name());
        let applied = freeze(node.process(), rng, ttl, &name);
        cluster.wait_healthy(Duration::from_secs(60));
        return applied;
    }
    let killed_at = mono_ns();
    node.process().kill();
    // Down for a while: the others (a quorum of two) go on without it.
    std::thread::sleep(Duration::from_millis(rng.random_range(1_000..4_000)));
    let ended = mono_ns();
    node.process().start();
    cluster.wait_healthy(Duration::from_secs(60));
    Applied {
        what: format!(
            "kill -9 etcd member {} ({}), back and healthy after {:.1} s",
            node.name(),
            if fault == Fault::KillEtcdLeader {
                "the leader"
            } else {
                "a follower"
            },
            (mono_ns() - killed_at) as f64 / 1e9
        ),
        killed_at: Some(killed_at),
        ended,
    }
}
