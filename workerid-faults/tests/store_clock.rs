//! The store server's wall clock stepped (libfaketime), where the store
//! judges expiry: PostgreSQL (`now()`) and MariaDB (`NOW(6)`). The
//! holders' clocks keep time. (Debian's Redis, built with jemalloc, does
//! not start under libfaketime: see docs/guarantees.md.)
//!
//! - Forward by three ttls: every lease not renewed since looks expired to
//!   the store, so a waiting acquirer gets a worker ID whose holder still
//!   runs. The holder learns it at its next renewal (refused) and stops.
//!   The watermark the holder stored at its last renewal keeps their IDs
//!   apart: the new holder waits until its clock is past every timestamp
//!   the old one may use, so no ID repeats or goes back. Measured and
//!   printed.
//! - Back by three ttls: a lease granted before the step lasts that much
//!   longer (its holder gone, the worker ID stays taken); one granted
//!   after it lasts its ttl.

use std::sync::Arc;
use std::time::{Duration, Instant};

use workerid::snowflake::{Worker, WorkerOptions};
use workerid::{Allocator, Error, Holder, LeaseOptions, LeaseStore, Namespace, Token};
use workerid_testkit::{FakeWallClock, StoreKind};

const TTL: Duration = Duration::from_secs(2);
const STEP: Duration = Duration::from_secs(6);

/// What a forward step did to a holder and a waiting acquirer.
#[derive(Debug)]
struct Forward {
    /// From the step until the waiting acquirer's worker joined (granted,
    /// and past the old holder's watermark).
    new_holder_ready_after: Duration,
    /// From the step to the old holder's last ID.
    old_holder_stopped_after: Duration,
    /// How long both issued IDs at once.
    overlap: Duration,
    old_ids: usize,
    new_ids: usize,
    /// IDs both holders issued.
    repeated: usize,
    /// The new holder's IDs below the old holder's largest.
    below_old: usize,
}

fn allocator(store: Arc<dyn LeaseStore>, namespace: &str) -> Allocator {
    let options = LeaseOptions::new().max_worker_id(0).ttl(TTL);
    Allocator::from_arc(store, namespace, options).expect("allocator")
}

/// Issues IDs every millisecond until the worker stops issuing (or 15 s).
fn issue(worker: Arc<Worker>) -> std::thread::JoinHandle<Vec<(Instant, u64)>> {
    std::thread::spawn(move || {
        let began = Instant::now();
        let mut ids = Vec::new();
        while began.elapsed() < Duration::from_secs(15) {
            match worker.next_id() {
                Ok(id) => ids.push((Instant::now(), id)),
                Err(_)
                    if !matches!(
                        worker.state(),
                        workerid::snowflake::WorkerState::Ready { .. }
                    ) =>
                {
                    break
                }
                Err(_) => {}
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        ids
    })
}

async fn forward(store: Arc<dyn LeaseStore>, clock: &FakeWallClock) -> Forward {
    let old = Arc::new(
        Worker::join(allocator(store.clone(), "forward"), WorkerOptions::new())
            .await
            .expect("the first holder joins"),
    );
    let old_ids = issue(old.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stepped = Instant::now();
    clock.set_offset(STEP.as_secs_f64());
    let waiting = allocator(store.clone(), "forward");
    let new = loop {
        match Worker::join(waiting.clone(), WorkerOptions::new()).await {
            Ok(worker) => break Arc::new(worker),
            Err(workerid::snowflake::Error::Lease(Error::NoAvailableId { .. })) => {
                assert!(stepped.elapsed() < TTL * 3, "the worker ID was never taken");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the waiting acquirer: {e}"),
        }
    };
    let new_holder_ready_after = stepped.elapsed();
    let new_ids = issue(new.clone());
    tokio::time::sleep(TTL * 2).await;
    new.stop().await;
    let new_ids = new_ids.join().expect("the new holder's IDs");
    let old_ids = old_ids.join().expect("the old holder's IDs");
    assert!(
        !matches!(old.state(), workerid::snowflake::WorkerState::Ready { .. }),
        "the old holder still issues: {:?}",
        old.state()
    );
    let last_old = old_ids.last().expect("the old holder issued").0;
    let first_new = new_ids.first().expect("the new holder issued").0;
    let largest_old = old_ids.iter().map(|(_, id)| *id).max().unwrap_or(0);
    let mut all: Vec<u64> = old_ids.iter().chain(&new_ids).map(|(_, id)| *id).collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    Forward {
        new_holder_ready_after,
        old_holder_stopped_after: last_old.saturating_duration_since(stepped),
        overlap: last_old.saturating_duration_since(first_new),
        old_ids: old_ids.len(),
        new_ids: new_ids.len(),
        repeated: total - all.len(),
        below_old: new_ids.iter().filter(|(_, id)| *id < largest_old).count(),
    }
}

/// Acquires in `namespace` until granted; how long that took from `since`.
async fn taken(store: &dyn LeaseStore, namespace: &Namespace, since: Instant) -> Duration {
    loop {
        let answer = store
            .acquire(namespace, 0, &Token::generate(), TTL, &Holder::default())
            .await;
        match answer {
            Ok(_) => return since.elapsed(),
            Err(Error::NoAvailableId { .. }) => {
                assert!(since.elapsed() < TTL + STEP * 2, "never granted again");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("acquire: {e}"),
        }
    }
}

/// The clock stepped back by `STEP` (from `+STEP`): how long an abandoned
/// lease granted before the step, and one granted after it, keep their
/// worker ID.
async fn back(store: Arc<dyn LeaseStore>, clock: &FakeWallClock) -> (Duration, Duration) {
    let before = Namespace::new("back-before").expect("namespace");
    let after = Namespace::new("back-after").expect("namespace");
    store
        .acquire(&before, 0, &Token::generate(), TTL, &Holder::default())
        .await
        .expect("a lease before the step");
    let granted = Instant::now();
    clock.set_offset(0.0);
    store
        .acquire(&after, 0, &Token::generate(), TTL, &Holder::default())
        .await
        .expect("a lease after the step");
    let granted_after = Instant::now();
    let held_after = taken(&*store, &after, granted_after).await;
    let held_before = taken(&*store, &before, granted).await;
    (held_before, held_after)
}

fn stepped(kind: StoreKind) {
    let running = kind.start();
    let clock = running.processes()[0].1.fake_wall_clock();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = workerid::open(&running.url())
            .await
            .expect("open")
            .lease_store();
        let forward = forward(store.clone(), &clock).await;
        let (held_before, held_after) = back(store, &clock).await;
        println!(
            "{kind}, ttl {TTL:?}, step {STEP:?}:\n  forward: {forward:?}\n  back: an \
             abandoned lease granted before the step kept its worker ID {held_before:.2?}, one \
             granted after it {held_after:.2?}"
        );
        assert!(
            forward.new_holder_ready_after < TTL * 2,
            "a step forward past the ttl lets a live holder's worker ID go: {forward:?}"
        );
        assert!(forward.old_ids > 0 && forward.new_ids > 0, "{forward:?}");
        assert!(
            forward.old_holder_stopped_after < TTL,
            "the old holder stops at its next renewal: {forward:?}"
        );
        assert!(
            forward.overlap <= forward.old_holder_stopped_after,
            "{forward:?}"
        );
        assert_eq!(forward.repeated, 0, "an ID was issued twice: {forward:?}");
        assert_eq!(
            forward.below_old, 0,
            "the new holder went below the old one's IDs: {forward:?}"
        );
        assert!(
            held_before >= TTL + STEP - Duration::from_millis(300),
            "a lease granted before a step back lasts ttl + step: {held_before:?}"
        );
        assert!(
            held_after < TTL + Duration::from_millis(1_500),
            "a lease granted after a step back lasts its ttl: {held_after:?}"
        );
    });
}

#[test]
fn postgres_clock_steps() {
    stepped(StoreKind::Postgres);
}

#[test]
fn mariadb_clock_steps() {
    stepped(StoreKind::MariaDb);
}
