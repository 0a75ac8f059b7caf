//! A store whose disk fills up under load, then empties: each store's data
//! on a small tmpfs of its own (`workerid_testkit::small_disk`). While the
//! disk is full every call that fails answers `Unavailable`; nothing that
//! was acknowledged is lost or repeated (segment ranges never overlap, a
//! worker ID's fences rise grant after grant, no snowflake ID repeats);
//! once space returns the store serves again. A server that exits for want
//! of space is started again once space returns, as its supervisor would.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workerid::segment::{Error as SegmentError, SegmentStore, Tag};
use workerid::snowflake::{Worker, WorkerOptions, WorkerState};
use workerid::{Allocator, Error, Holder, LeaseOptions, LeaseStore, Namespace, Token};
use workerid_testkit::small_disk::SmallDisk;
use workerid_testkit::StoreKind;

const TTL: Duration = Duration::from_secs(2);
const FULL_FOR: Duration = Duration::from_secs(5);

/// What the load saw, by phase.
#[derive(Debug, Default)]
struct Seen {
    /// Acknowledged segment ranges: (first, last).
    ranges: Vec<(u64, u64)>,
    /// Acknowledged grants in order: (worker ID, fence).
    grants: Vec<(u32, u64)>,
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
    fn phase(&self) -> &'static str {
        *self.phase.lock().unwrap()
    }
    fn ok(&self) {
        let phase = self.phase();
        *self.seen.lock().unwrap().ok.entry(phase).or_default() += 1;
    }
    fn error(&self, kind: String) {
        let phase = self.phase();
        *self
            .seen
            .lock()
            .unwrap()
            .errors
            .entry((phase, kind))
            .or_default() += 1;
    }
}

fn lease_error(e: &Error) -> String {
    match e {
        Error::Unavailable { .. } => "unavailable".into(),
        other => format!("{other:?}"),
    }
}

fn segment_error(e: &SegmentError) -> String {
    match e {
        SegmentError::Unavailable { .. } => "unavailable".into(),
        other => format!("{other:?}"),
    }
}

async fn reserve_loop(load: Arc<Load>, store: Arc<dyn SegmentStore>, tag: Tag) {
    while !load.stop.load(Ordering::Relaxed) {
        match store.reserve(&tag, None).await {
            Ok(range) => {
                load.seen
                    .lock()
                    .unwrap()
                    .ranges
                    .push((range.first, range.last));
                load.ok();
            }
            Err(e) => load.error(format!("reserve: {}", segment_error(&e))),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn lease_loop(load: Arc<Load>, store: Arc<dyn LeaseStore>) {
    let namespace = Namespace::new("disk-churn").expect("namespace");
    while !load.stop.load(Ordering::Relaxed) {
        let token = Token::generate();
        match store
            .acquire(&namespace, 63, &token, TTL, &Holder::default())
            .await
        {
            Ok(grant) => {
                load.seen
                    .lock()
                    .unwrap()
                    .grants
                    .push((grant.id.get(), grant.fence));
                load.ok();
                if let Err(e) = store.release(&namespace, grant.id, &token, 1).await {
                    load.error(format!("release: {}", lease_error(&e)));
                }
            }
            Err(e) => load.error(format!("acquire: {}", lease_error(&e))),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
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

fn disk_full(kind: StoreKind, mib: u64) {
    let disk = SmallDisk::mount(mib);
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
        let tasks = (
            tokio::spawn(reserve_loop(load.clone(), segments, tag)),
            tokio::spawn(lease_loop(load.clone(), store.lease_store())),
            tokio::spawn(worker_loop(load.clone(), store.lease_store())),
        );
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
        tasks.0.await.expect("reserves");
        tasks.1.await.expect("leases");
        let ids = tasks.2.await.expect("the worker");
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
        seen.ranges.len(),
        seen.grants.len()
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
    let mut ranges = seen.ranges.clone();
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        assert!(
            pair[0].1 < pair[1].0,
            "{kind}: acknowledged ranges overlap: {pair:?}"
        );
    }
    let mut fences: BTreeMap<u32, u64> = BTreeMap::new();
    for &(id, fence) in &seen.grants {
        let last = fences.insert(id, fence).unwrap_or(0);
        assert!(
            fence > last,
            "{kind}: worker ID {id} granted with fence {fence} after {last}: an acknowledged grant was lost"
        );
    }
    assert!(
        seen.ok.get("before").is_some_and(|n| *n > 0),
        "{kind}: nothing was served before the disk filled"
    );
}

#[test]
fn sqlite_disk_full() {
    disk_full(StoreKind::Sqlite, 16);
}

#[test]
fn redis_disk_full() {
    disk_full(StoreKind::RedisDurable, 32);
}

#[test]
fn postgres_disk_full() {
    disk_full(StoreKind::Postgres, 128);
}

#[test]
fn mariadb_disk_full() {
    disk_full(StoreKind::MariaDb, 256);
}

#[test]
fn etcd_disk_full() {
    disk_full(StoreKind::Etcd, 160);
}
