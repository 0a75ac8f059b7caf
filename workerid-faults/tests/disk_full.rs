//! A store whose disk fills up under load, then empties: each store's data
//! on a small tmpfs of its own (`workerid_testkit::small_disk`). While the
//! disk is full every call that fails answers `Unavailable`; nothing that
//! was acknowledged is lost or repeated (segment ranges never overlap, a
//! worker ID's fences rise grant after grant, no snowflake ID repeats);
//! once space returns the store serves again. A server that exits for want
//! of space is started again once space returns, as its supervisor would.
//! The service on a store whose disk fills keeps every rule of its checker
//! and serves again within ttl + 2 s of the disk being freed.

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use support::disk_load::{create_tag, repeated, start_load, Load};
use workerid_faults::service::ServiceFault;
use workerid_faults::targets::Target;
use workerid_testkit::small_disk::SmallDisk;
use workerid_testkit::StoreKind;

const FULL_FOR: Duration = Duration::from_secs(5);

fn disk_full(kind: StoreKind) {
    let disk = SmallDisk::for_store(kind);
    let running = disk.start(kind);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let load = Load::new();
    let mut restarted = Vec::new();
    let healed_after = runtime.block_on(async {
        let options = workerid::OpenOptions::new().request_timeout(Duration::from_secs(1));
        let store = options.open(&running.url()).await.expect("open");
        create_tag(&store).await;
        let tasks = start_load(&load, &store);
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
        let what = format!("{kind} after the disk was freed");
        let healed_after = load
            .served_again("freed", freed, Duration::from_secs(20), &what)
            .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        load.stop.store(true, Ordering::Relaxed);
        let mut ids = Vec::new();
        for task in tasks {
            ids.extend(task.await.expect("a load task"));
        }
        assert_eq!(repeated(&ids), 0, "{kind}: a snowflake ID repeated");
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
    seen.assert_nothing_lost(kind);
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
