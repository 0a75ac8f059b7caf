//! A store whose disk fills up under load, then empties: each store's data
//! on a small tmpfs of its own (`workerid_testkit::small_disk`). While the
//! disk is full every call that fails answers `Unavailable`; nothing that
//! was acknowledged is lost or repeated (segment ranges never overlap, a
//! worker ID's fences rise grant after grant, no snowflake ID repeats);
//! once space returns the store serves again. A server that exits for want
//! of space is started again once space returns, as its supervisor would.
//! The service on a store whose disk fills keeps every rule of its checker
//! and serves again within ttl + 2 s of the disk being freed.
//!
//! A disk that fails while it has room (`workerid_testkit::failing_disk`:
//! ext4 on a loop device, shut down at once, every write, fsync and read
//! failing with `EIO`, nothing that had not been fsynced kept): while it is
//! failed every call that fails answers `Unavailable`; then the clients
//! and the servers stop, the disk is mounted again (its journal replayed),
//! the servers start again and new clients serve, and nothing acknowledged
//! before the failure is lost or repeated. The `*_fsync_fails` tests make
//! the same disk fail as thin-provisioned storage that ran out of space
//! does (`Failure::ThinPoolFull`): writes succeed, the `fsync` that must
//! store them fails.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workerid::segment::Tag;
use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, LeaseOptions, LeaseStore, Namespace};
use workerid_faults::acknowledged::{churn_leases_until, reserve_until, Acknowledged, Answer};
use workerid_faults::service::ServiceFault;
use workerid_faults::targets::Target;
use workerid_testkit::failing_disk::{FailingDisk, Failure};
use workerid_testkit::small_disk::SmallDisk;
use workerid_testkit::{RunningStore, StoreKind};

const TTL: Duration = Duration::from_secs(2);
const FULL_FOR: Duration = Duration::from_secs(5);
const FAILED_FOR: Duration = Duration::from_secs(4);

/// What the load saw, by phase.
#[derive(Debug, Default)]
struct Seen {
    acknowledged: Acknowledged,
    /// Errors by phase and kind.
    errors: BTreeMap<(&'static str, String), usize>,
    /// Successes by phase.
    ok: BTreeMap<&'static str, usize>,
}

struct Load {
    phase: Mutex<&'static str>,
    seen: Mutex<Seen>,
    stop: AtomicBool,
}

impl Load {
    /// Notes what a call of the load answered, under the current phase.
    fn note(&self, answer: Answer) {
        let phase = *self.phase.lock().unwrap();
        let mut seen = self.seen.lock().unwrap();
        match answer {
            Answer::Reserved(range, _) => seen.acknowledged.ranges.push(range),
            Answer::Granted(grant) => seen.acknowledged.grants.push(grant),
            Answer::Failed(call, kind) => {
                *seen
                    .errors
                    .entry((phase, format!("{call}: {kind}")))
                    .or_default() += 1;
                return;
            }
        }
        *seen.ok.entry(phase).or_default() += 1;
    }
}

/// A snowflake worker that issues every millisecond, joining again after
/// it loses its lease; returns every ID it issued.
async fn worker_loop(load: Arc<Load>, store: Arc<dyn LeaseStore>) -> Vec<u64> {
    let options = LeaseOptions::new().max_worker_id(7).ttl(TTL);
    let allocator = Allocator::from_arc(store, "disk-holder", options).expect("allocator");
    let mut ids = Vec::new();
    while !load.stop.load(Ordering::Relaxed) {
        let Ok(worker) = Worker::join(allocator.clone(), WorkerOptions::new()).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        while !load.stop.load(Ordering::Relaxed) {
            match worker.next_id() {
                Ok(id) => ids.push(id),
                Err(_) if !matches!(worker.state(), WorkerState::Ready { .. }) => break,
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        worker.stop().await;
    }
    ids
}

fn disk_full(kind: StoreKind) {
    let disk = SmallDisk::for_store(kind);
    let running = disk.start(kind);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let load = Arc::new(Load {
        phase: Mutex::new("before"),
        seen: Mutex::default(),
        stop: AtomicBool::new(false),
    });
    let mut restarted = Vec::new();
    let healed_after = runtime.block_on(async {
        let options = workerid::OpenOptions::new().request_timeout(Duration::from_secs(1));
        let store = options.open(&running.url()).await.expect("open");
        let segments = store.segment_store();
        let tag = Tag::new("disk").expect("tag");
        segments
            .create_tag(&tag, 1, 100)
            .await
            .expect("create the tag");
        let pause = Duration::from_millis(5);
        let reserves = tokio::spawn({
            let load = load.clone();
            async move {
                reserve_until(&load.stop, &*segments, &tag, pause, |a| load.note(a)).await;
            }
        });
        let leases = tokio::spawn({
            let (load, leases) = (load.clone(), store.lease_store());
            async move {
                let namespace = Namespace::new("disk-churn").expect("namespace");
                let pool = (63, TTL);
                churn_leases_until(&load.stop, &*leases, &namespace, pool, pause, |a| {
                    load.note(a)
                })
                .await;
            }
        });
        let worker = tokio::spawn(worker_loop(load.clone(), store.lease_store()));
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        *load.phase.lock().unwrap() = "full";
        let filled = disk.fill();
        println!("{kind}: the disk is full ({filled} bytes of filler)");
        tokio::time::sleep(FULL_FOR).await;
        *load.phase.lock().unwrap() = "freed";
        disk.free();
        let freed = Instant::now();
        for (name, process) in running.processes() {
            if !process.is_running() {
                restarted.push(name.clone());
                process.start();
            }
        }
        let healed_after = loop {
            let served = load
                .seen
                .lock()
                .unwrap()
                .ok
                .get("freed")
                .copied()
                .unwrap_or(0);
            if served >= 20 {
                break freed.elapsed();
            }
            assert!(
                freed.elapsed() < Duration::from_secs(20),
                "{kind} never served again after the disk was freed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        load.stop.store(true, Ordering::Relaxed);
        reserves.await.expect("reserves");
        leases.await.expect("leases");
        let ids = worker.await.expect("the worker");
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "{kind}: a snowflake ID repeated");
        healed_after
    });
    let seen = load.seen.lock().unwrap();
    println!(
        "{kind}: served {:?}; errors {:?}; servers started again: {restarted:?}; served again \
         {healed_after:.2?} after the disk was freed; {} ranges, {} grants",
        seen.ok,
        seen.errors,
        seen.acknowledged.ranges.len(),
        seen.acknowledged.grants.len()
    );
    let wrong: Vec<_> = seen
        .errors
        .keys()
        .filter(|(_, kind)| !kind.ends_with("unavailable"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{kind}: errors other than Unavailable: {wrong:?}"
    );
    assert_eq!(
        seen.acknowledged.repeated_segment_ids(),
        0,
        "{kind}: acknowledged ranges overlap"
    );
    assert_eq!(
        seen.acknowledged.fences_gone_back(),
        0,
        "{kind}: a grant's fence went back: an acknowledged grant was lost"
    );
    assert!(
        seen.ok.get("before").is_some_and(|n| *n > 0),
        "{kind}: nothing was served before the disk filled"
    );
}

#[test]
fn sqlite_disk_full() {
    disk_full(StoreKind::Sqlite);
}

#[test]
fn redis_disk_full() {
    disk_full(StoreKind::RedisDurable);
}

#[test]
fn postgres_disk_full() {
    disk_full(StoreKind::Postgres);
}

#[test]
fn mariadb_disk_full() {
    disk_full(StoreKind::MariaDb);
}

#[test]
fn etcd_disk_full() {
    disk_full(StoreKind::Etcd);
}

/// Three servers on a store whose disk fills up now and then: no rule of
/// the service checker broken, every server serving again within ttl + 2 s.
fn the_service_through_full_disks(kind: StoreKind) {
    let target = Target::start_on_small_disk(kind).unwrap();
    let mut config = support::service_config(&target, Duration::from_secs(12));
    config.faults = vec![ServiceFault::FillStoreDisk];
    support::service_survives(&target, config);
}

#[test]
fn the_service_on_sqlite_through_full_disks() {
    the_service_through_full_disks(StoreKind::Sqlite);
}

#[test]
fn the_service_on_redis_through_full_disks() {
    the_service_through_full_disks(StoreKind::RedisDurable);
}

/// Three servers on a store whose disk fails now and then (and is mounted
/// again, the store restarted): no rule of the service checker broken,
/// every server serving again within ttl + 2 s.
fn the_service_through_failing_disks(kind: StoreKind) {
    let target = Target::start_on_failing_disk(kind).unwrap();
    let mut config = support::service_config(&target, Duration::from_secs(12));
    config.faults = vec![ServiceFault::FailStoreDisk];
    support::service_survives(&target, config);
}

#[test]
fn the_service_on_redis_through_failing_disks() {
    the_service_through_failing_disks(StoreKind::RedisDurable);
}

#[test]
fn the_service_on_postgres_through_failing_disks() {
    the_service_through_failing_disks(StoreKind::Postgres);
}

/// Starts the load of [`disk_full`] on `store` (the reservations, the lease
/// churn and a snowflake worker) until `load.stop`; each task returns the
/// snowflake IDs it issued.
fn start_load(
    load: &Arc<Load>,
    store: &workerid::AnyStore,
) -> Vec<tokio::task::JoinHandle<Vec<u64>>> {
    let pause = Duration::from_millis(5);
    let reserves = tokio::spawn({
        let (load, segments) = (load.clone(), store.segment_store());
        async move {
            let tag = Tag::new("disk").expect("tag");
            reserve_until(&load.stop, &*segments, &tag, pause, |a| load.note(a)).await;
            Vec::new()
        }
    });
    let leases = tokio::spawn({
        let (load, leases) = (load.clone(), store.lease_store());
        async move {
            let namespace = Namespace::new("disk-churn").expect("namespace");
            churn_leases_until(&load.stop, &*leases, &namespace, (63, TTL), pause, |a| {
                load.note(a)
            })
            .await;
            Vec::new()
        }
    });
    let worker = tokio::spawn(worker_loop(load.clone(), store.lease_store()));
    vec![reserves, leases, worker]
}

/// A store whose disk fails under load, after `prepare` had its way with
/// it: see the module's doc. Returns what the load saw and how many
/// snowflake IDs repeated.
fn fail_disk_under_load(
    kind: StoreKind,
    failure: Failure,
    prepare: impl FnOnce(&RunningStore),
) -> (Seen, usize) {
    let disk = FailingDisk::for_store_failing_as(kind, failure);
    let running = disk.start(kind);
    prepare(&running);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let load = Arc::new(Load {
        phase: Mutex::new("before"),
        seen: Mutex::default(),
        stop: AtomicBool::new(false),
    });
    let options = workerid::OpenOptions::new().request_timeout(Duration::from_secs(1));
    let mut ids = Vec::new();
    // (server, how long after the failure it exited by itself, if it did)
    let mut exits: Vec<(String, Option<Duration>)> = Vec::new();
    let (probe, healed_after) = runtime.block_on(async {
        let store = options.open(&running.url()).await.expect("open");
        let tag = Tag::new("disk").expect("tag");
        store
            .segment_store()
            .create_tag(&tag, 1, 100)
            .await
            .expect("create the tag");
        let tasks = start_load(&load, &store);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        *load.phase.lock().unwrap() = "failed";
        disk.fail();
        let failed = Instant::now();
        let mut probe = None;
        let processes = running.processes();
        let mut exited: Vec<Option<Duration>> = vec![None; processes.len()];
        while failed.elapsed() < FAILED_FOR {
            for (at, (_, process)) in exited.iter_mut().zip(&processes) {
                if at.is_none() && !process.is_running() {
                    *at = Some(failed.elapsed());
                }
            }
            if probe.is_none() && failed.elapsed() > Duration::from_secs(1) {
                probe = Some(match store.segment_store().reserve(&tag, None).await {
                    Ok(range) => format!("reserved {range:?}"),
                    Err(e) => format!("{e}"),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if failure == Failure::Intermittent {
            // The errors end under the same mount: the servers that exited
            // start again, the clients go on, until 20 calls are served.
            *load.phase.lock().unwrap() = "healed";
            disk.heal();
            let healed = Instant::now();
            for (_, process) in &processes {
                process.start();
            }
            while load
                .seen
                .lock()
                .unwrap()
                .ok
                .get("healed")
                .copied()
                .unwrap_or(0)
                < 20
            {
                assert!(
                    healed.elapsed() < Duration::from_secs(20),
                    "{kind} never served again once the disk's errors ended"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            println!(
                "{kind}: served again {:.2?} after the errors ended",
                healed.elapsed()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // The clients stop and let go of their files (the SQLite file is
        // opened by the client itself), the servers that still run are
        // stopped, the disk is mounted again (what only the page cache
        // held is gone) and everything starts again.
        *load.phase.lock().unwrap() = "stopping";
        load.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            ids.extend(task.await.expect("a load task"));
        }
        drop(store);
        for ((name, process), at) in processes.iter().zip(exited) {
            process.kill();
            exits.push((name.clone(), at));
        }
        *load.phase.lock().unwrap() = "recovered";
        load.stop.store(false, Ordering::Relaxed);
        let recovering = Instant::now();
        disk.recover();
        for (_, process) in &processes {
            process.start();
        }
        let store = options.open(&running.url()).await.expect("open again");
        let tasks = start_load(&load, &store);
        let healed_after = loop {
            let served = load
                .seen
                .lock()
                .unwrap()
                .ok
                .get("recovered")
                .copied()
                .unwrap_or(0);
            if served >= 20 {
                break recovering.elapsed();
            }
            assert!(
                recovering.elapsed() < Duration::from_secs(30),
                "{kind} never served again after the disk was mounted again"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        load.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            ids.extend(task.await.expect("a load task"));
        }
        (probe, healed_after)
    });
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let seen = std::mem::take(&mut *load.seen.lock().unwrap());
    println!(
        "{kind}: served {:?}; errors {:?}; a reservation 1 s into the failure: {probe:?}; \
         servers that exited by themselves (after the failure): {exits:?}; served again \
         {healed_after:.2?} after the remount began; {} ranges, {} grants",
        seen.ok,
        seen.errors,
        seen.acknowledged.ranges.len(),
        seen.acknowledged.grants.len()
    );
    (seen, ids.len() - sorted.len())
}

/// A store whose disk fails under load loses nothing it acknowledged, and
/// every call that fails answers `Unavailable`.
fn disk_fails(kind: StoreKind, failure: Failure) {
    let (seen, repeated_ids) = fail_disk_under_load(kind, failure, |_| {});
    assert_eq!(repeated_ids, 0, "{kind}: a snowflake ID repeated");
    let wrong: Vec<_> = seen
        .errors
        .keys()
        .filter(|(_, kind)| !kind.ends_with("unavailable"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{kind}: errors other than Unavailable: {wrong:?}"
    );
    // A store that wrote only over blocks the thin pool already held
    // (SQLite's WAL, rewound after each checkpoint) never meets the
    // intermittent failure: nothing to require of it there.
    assert!(
        failure == Failure::Intermittent || seen.errors.keys().any(|(phase, _)| *phase == "failed"),
        "{kind}: no call failed while the disk was failed"
    );
    assert_eq!(
        seen.acknowledged.repeated_segment_ids(),
        0,
        "{kind}: acknowledged ranges overlap"
    );
    assert_eq!(
        seen.acknowledged.fences_gone_back(),
        0,
        "{kind}: a grant's fence went back: an acknowledged grant was lost"
    );
    assert!(
        seen.ok.get("before").is_some_and(|n| *n > 0),
        "{kind}: nothing was served before the disk failed"
    );
}

#[test]
fn sqlite_disk_fails() {
    disk_fails(StoreKind::Sqlite, Failure::Shutdown);
}

#[test]
fn redis_disk_fails() {
    disk_fails(StoreKind::RedisDurable, Failure::Shutdown);
}

#[test]
fn postgres_disk_fails() {
    disk_fails(StoreKind::Postgres, Failure::Shutdown);
}

#[test]
fn mariadb_disk_fails() {
    disk_fails(StoreKind::MariaDb, Failure::Shutdown);
}

#[test]
fn etcd_disk_fails() {
    disk_fails(StoreKind::Etcd, Failure::Shutdown);
}

#[test]
fn sqlite_fsync_fails() {
    disk_fails(StoreKind::Sqlite, Failure::ThinPoolFull);
}

#[test]
fn redis_fsync_fails() {
    disk_fails(StoreKind::RedisDurable, Failure::ThinPoolFull);
}

#[test]
fn postgres_fsync_fails() {
    disk_fails(StoreKind::Postgres, Failure::ThinPoolFull);
}

#[test]
fn mariadb_fsync_fails() {
    disk_fails(StoreKind::MariaDb, Failure::ThinPoolFull);
}

#[test]
fn etcd_fsync_fails() {
    disk_fails(StoreKind::Etcd, Failure::ThinPoolFull);
}

#[test]
fn sqlite_fsync_fails_for_a_while() {
    disk_fails(StoreKind::Sqlite, Failure::Intermittent);
}

#[test]
fn redis_fsync_fails_for_a_while() {
    disk_fails(StoreKind::RedisDurable, Failure::Intermittent);
}

#[test]
fn postgres_fsync_fails_for_a_while() {
    disk_fails(StoreKind::Postgres, Failure::Intermittent);
}

#[test]
fn mariadb_fsync_fails_for_a_while() {
    disk_fails(StoreKind::MariaDb, Failure::Intermittent);
}

#[test]
fn etcd_fsync_fails_for_a_while() {
    disk_fails(StoreKind::Etcd, Failure::Intermittent);
}

/// The test's teeth: Redis told to leave the AOF to the kernel
/// (`appendfsync no`) acknowledges writes that the failed disk never got,
/// and the checker must find them lost after the remount.
#[test]
fn redis_without_fsync_loses_acknowledged_writes_when_its_disk_fails() {
    let (seen, _) = fail_disk_under_load(StoreKind::RedisDurable, Failure::Shutdown, |running| {
        let url = running.url();
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.split('/').next())
            .expect("a port in the URL");
        let out = std::process::Command::new("redis-cli")
            .args(["-p", port, "CONFIG", "SET", "appendfsync", "no"])
            .output()
            .expect("run redis-cli");
        assert!(
            out.status.success() && out.stdout.starts_with(b"OK"),
            "{out:?}"
        );
    });
    // The tag itself, created and acknowledged before the failure, may be
    // gone too: a reservation after the remount then finds no such tag.
    let tag_lost = seen
        .errors
        .keys()
        .any(|(phase, kind)| *phase == "recovered" && kind.contains("UnknownTag"));
    let lost =
        seen.acknowledged.repeated_segment_ids() as usize + seen.acknowledged.fences_gone_back();
    println!(
        "appendfsync no: {} segment IDs handed out twice, {} fences gone back, the tag lost: \
         {tag_lost}",
        seen.acknowledged.repeated_segment_ids(),
        seen.acknowledged.fences_gone_back()
    );
    assert!(
        lost > 0 || tag_lost,
        "the checker found nothing lost without fsync"
    );
}
