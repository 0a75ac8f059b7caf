//! A store whose disk fails while it has room, under load
//! (`workerid_testkit::failing_disk`). Shut down at once
//! (`Failure::Shutdown`, ext4 on a loop device: every write, fsync and
//! read failing with `EIO`, nothing that had not been fsynced kept), or as
//! thin-provisioned storage that ran out of space (`Failure::ThinPoolFull`:
//! writes succeed, the `fsync` that must store them fails, ext4 turns
//! read-only), or so that every `fsync` fails for a while under a file
//! system that stays writable and keeps its metadata
//! (`Failure::Intermittent`, a FUSE disk of the test kit's: what a failed
//! `fsync` covered never reaches the disk though reads still show it; the
//! servers stop, the errors end under the same mount, the pages the failed
//! `fsync`s lost are dropped from the page cache, and the servers start
//! again and serve). While it is failed every call that fails answers
//! `Unavailable`; then the clients and the servers stop, the disk is
//! mounted again (what only the page cache held is gone), the servers start
//! again and new clients serve, and nothing acknowledged is lost or
//! repeated (segment ranges never overlap, a worker ID's fences rise, no
//! snowflake ID repeats). The service and its checker go through the same
//! faults (`ServiceFault::FailStoreDisk`, `ServiceFault::FailStoreFsync`),
//! and the lease nemesis through failing `fsync`s among every other fault.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use support::disk_load::{create_tag, repeated, start_load, Load, Seen};
use workerid_faults::fault::Fault;
use workerid_faults::service::ServiceFault;
use workerid_faults::targets::Target;
use workerid_testkit::failing_disk::{FailingDisk, Failure};
use workerid_testkit::{RunningStore, StoreKind};

const FAILED_FOR: Duration = Duration::from_secs(4);

/// Three servers on `target` under `fault` now and then: no rule of the
/// service checker broken, every server serving again within ttl + 2 s.
fn the_service_through(target: Target, fault: ServiceFault) {
    let mut config = support::service_config(&target, Duration::from_secs(12));
    config.faults = vec![fault];
    support::service_survives(&target, config);
    some_fsync_failed(&target);
}

/// A store on a disk whose `fsync` fails met the failure: some `fsync`
/// of its answered `EIO`.
fn some_fsync_failed(target: &Target) {
    if let Some(failures) = target.fsync_failures() {
        println!("{}: the disk's fsync failures: {failures:?}", target.name());
        assert!(
            failures.fsyncs_failed > 0,
            "{}: no fsync failed while the disk did",
            target.name()
        );
    }
}

#[test]
fn the_service_on_redis_through_failing_disks() {
    let target = Target::start_on_failing_disk(StoreKind::RedisDurable).unwrap();
    the_service_through(target, ServiceFault::FailStoreDisk);
}

#[test]
fn the_service_on_postgres_through_failing_disks() {
    let target = Target::start_on_failing_disk(StoreKind::Postgres).unwrap();
    the_service_through(target, ServiceFault::FailStoreDisk);
}

#[test]
fn the_service_on_redis_through_failing_fsyncs() {
    let target = Target::start_on_fsync_failing_disk(StoreKind::RedisDurable).unwrap();
    the_service_through(target, ServiceFault::FailStoreFsync);
}

#[test]
fn the_service_on_postgres_through_failing_fsyncs() {
    let target = Target::start_on_fsync_failing_disk(StoreKind::Postgres).unwrap();
    the_service_through(target, ServiceFault::FailStoreFsync);
}

/// The lease nemesis with every fault of a store whose `fsync` fails now
/// and then (`Fault::FailStoreFsync` among the client and server faults):
/// the checker finds nothing.
fn every_fault_with_failing_fsyncs(kind: StoreKind) {
    let target = Target::start_on_fsync_failing_disk(kind).unwrap();
    assert!(target.server_faults().contains(&Fault::FailStoreFsync));
    support::survives_every_fault(&target, Duration::from_secs(20));
    some_fsync_failed(&target);
}

#[test]
fn sqlite_through_every_fault_and_failing_fsyncs() {
    every_fault_with_failing_fsyncs(StoreKind::Sqlite);
}

#[test]
fn mariadb_through_every_fault_and_failing_fsyncs() {
    every_fault_with_failing_fsyncs(StoreKind::MariaDb);
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
    let load = Load::new();
    let options = workerid::OpenOptions::new().request_timeout(Duration::from_secs(1));
    let mut ids = Vec::new();
    // (server, how long after the failure it exited by itself, if it did)
    let mut exits: Vec<(String, Option<Duration>)> = Vec::new();
    let (probe, healed_after) = runtime.block_on(async {
        let store = options.open(&running.url()).await.expect("open");
        let tag = create_tag(&store).await;
        let tasks = start_load(&load, &store);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        load.fail(&disk, kind);
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
            // The servers stop, the errors end under the same mount, and
            // the pages the failed fsyncs lost are dropped, as an operator
            // must before a store starts again there (guarantees.md, "An
            // fsync that fails for a while"); the servers start again and
            // the clients go on, until 20 calls are served. SQLite's
            // clients, which hold its file here, go on without a drop.
            *load.phase.lock().unwrap() = "healed";
            for (_, process) in &processes {
                process.kill();
            }
            disk.heal();
            if !kind.in_process() {
                disk.drop_page_cache();
            }
            let healed = Instant::now();
            for (_, process) in &processes {
                process.start();
            }
            let what = format!("{kind} once the disk's errors ended");
            load.served_again("healed", healed, Duration::from_secs(20), &what)
                .await;
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
        let what = format!("{kind} after the disk was mounted again");
        let healed_after = load
            .served_again("recovered", recovering, Duration::from_secs(30), &what)
            .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        load.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            ids.extend(task.await.expect("a load task"));
        }
        (probe, healed_after)
    });
    let seen = std::mem::take(&mut *load.seen.lock().unwrap());
    if let Some(failures) = disk.fsync_failures() {
        println!("{kind}: the disk's fsync failures: {failures:?}");
        assert!(
            failures.fsyncs_failed > 0,
            "{kind}: no fsync failed while the disk did"
        );
    }
    println!(
        "{kind}: served {:?}; errors {:?}; a reservation 1 s into the failure: {probe:?}; \
         servers that exited by themselves (after the failure): {exits:?}; served again \
         {healed_after:.2?} after the remount began; {} ranges, {} grants; calls of a store in \
         this process in flight across the failure (no verdict): {}",
        seen.ok,
        seen.errors,
        seen.acknowledged.ranges.len(),
        seen.acknowledged.grants.len(),
        seen.in_flight
    );
    (seen, repeated(&ids))
}

/// A store whose disk fails under load loses nothing it acknowledged, and
/// every call that fails answers `Unavailable`.
fn disk_fails(kind: StoreKind, failure: Failure) {
    let (seen, repeated_ids) = fail_disk_under_load(kind, failure, |_| {});
    assert_eq!(repeated_ids, 0, "{kind}: a snowflake ID repeated");
    seen.assert_nothing_lost(kind);
    assert!(
        seen.errors.keys().any(|(phase, _)| *phase == "failed"),
        "{kind}: no call failed while the disk was failed"
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
