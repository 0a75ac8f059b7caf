//! Contention from several OS processes: the test binary runs itself as the
//! contenders (the scenario, in a child, contends and reports instead of
//! spawning), each with connections of its own, started together.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use workerid_core::Error;

use crate::support::{ns, Ctx};
use crate::{Outcome, StoreFactory};

/// Set in a child: `<namespace>|<max worker ID>|<acquires>|<start, UNIX ms>`.
pub(crate) const CONTENDER_ENV: &str = "WORKERID_CONFORMANCE_CONTENDER";

/// What a child prints before each answer, so the harness's own lines are
/// told apart.
const ANSWER: &str = "workerid-contender:";

const PROCESSES: usize = 4;
const EACH: usize = 4;
const MAX_WORKER_ID: u32 = 9;
/// How long the contenders may take, together, to start and answer.
const CONTENDER_LIMIT: Duration = Duration::from_secs(120);

/// Everything `pipe` gives until its end, read by a thread of its own.
fn read_in_thread(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// N acquirers in N OS processes, each with its own connections, on C free
/// IDs at once get exactly min(N, C) distinct grants, the rest
/// `NoAvailableId`; the store then counts C live leases. Skipped when the
/// factory cannot share its store with child processes
/// ([`StoreFactory::share_with_children`]) or the scenario runs outside a
/// test harness (the children run the test of the same name).
pub async fn contention_across_processes(f: &dyn StoreFactory) -> Outcome {
    if let Ok(spec) = std::env::var(CONTENDER_ENV) {
        contend(f, &spec).await;
        return Outcome::Passed;
    }
    let Some(env) = f.share_with_children() else {
        return Outcome::Skipped("the store cannot be shared with other processes".into());
    };
    let current = std::thread::current();
    let Some(test) = current.name().filter(|name| *name != "main") else {
        return Outcome::Skipped(
            "not run by a test harness: no test for the children to run".into(),
        );
    };
    let ctx = Ctx::new(f, "contention_across_processes").await;
    let name = ctx.namespace();
    // Room for every child to start and connect before they all begin.
    let start = unix_ms() + 2_000;
    let spec = format!("{name}|{MAX_WORKER_ID}|{EACH}|{start}");
    let exe = std::env::current_exe().expect("the test binary's path");
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", test, "--nocapture", "--test-threads=1"])
                .env(CONTENDER_ENV, &spec)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("start a contending process: {e}"))
        })
        .collect();
    let outputs = tokio::task::spawn_blocking(move || {
        // A contender that never ends (a store that never answers) is
        // killed, and fails the scenario with what it printed; every pipe
        // is drained meanwhile, so that none fills and blocks its writer.
        let deadline = Instant::now() + CONTENDER_LIMIT;
        let drained: Vec<_> = children
            .into_iter()
            .map(|mut child| {
                let stdout = child.stdout.take().map(read_in_thread);
                let stderr = child.stderr.take().map(read_in_thread);
                (child, stdout, stderr)
            })
            .collect();
        drained
            .into_iter()
            .map(|(mut child, stdout, stderr)| {
                while child.try_wait().expect("a contending process").is_none() {
                    if Instant::now() >= deadline {
                        let _ = child.kill();
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let joined = |reader: Option<std::thread::JoinHandle<Vec<u8>>>| {
                    reader.map_or_else(Vec::new, |r| r.join().unwrap_or_default())
                };
                Output {
                    status: child.wait().expect("a contending process"),
                    stdout: joined(stdout),
                    stderr: joined(stderr),
                }
            })
            .collect::<Vec<_>>()
    })
    .await
    .expect("waiting for the contending processes");
    let (mut granted, mut refused) = (BTreeSet::new(), 0);
    for output in outputs {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "a contending process failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let answers: Vec<&str> = stdout
            .lines()
            // The harness may print its own words before ours on a line.
            .filter_map(|line| line.split_once(ANSWER).map(|(_, answer)| answer))
            .collect();
        assert_eq!(
            answers.len(),
            EACH,
            "each process answers every acquire:\n{stdout}"
        );
        for answer in answers {
            match answer.trim().split_once(' ') {
                Some(("grant", id)) => {
                    let id: u32 = id.parse().expect("a worker ID");
                    assert!(id <= MAX_WORKER_ID, "worker ID {id} is outside the pool");
                    assert!(
                        granted.insert(id),
                        "worker ID {id} was granted to two processes"
                    );
                }
                _ if answer.trim() == "full" => refused += 1,
                _ => panic!("a contending process answered {answer:?}"),
            }
        }
    }
    let pool = MAX_WORKER_ID as usize + 1;
    let asked = PROCESSES * EACH;
    assert_eq!(
        granted.len(),
        asked.min(pool),
        "{asked} acquirers in {PROCESSES} processes on {pool} free IDs"
    );
    assert_eq!(
        refused,
        asked.saturating_sub(pool),
        "the rest are NoAvailableId"
    );
    if ctx.caps.list {
        let listing = ctx.store().await.list(&ns(&name)).await.expect("list");
        let live = listing.leases.iter().filter(|l| l.state.is_live()).count();
        assert_eq!(live, pool, "every grant is a live lease in the store");
    }
    Outcome::Passed
}

/// The child's part: waits for the common start, acquires `EACH` times at
/// once on handles of its own, and prints each answer.
async fn contend(f: &dyn StoreFactory, spec: &str) {
    let parts: Vec<&str> = spec.split('|').collect();
    let [name, max, each, start] = parts[..] else {
        panic!("{CONTENDER_ENV} is {spec:?}");
    };
    let max: u32 = max.parse().expect("a pool size");
    let each: usize = each.parse().expect("a count");
    let start: u64 = start.parse().expect("a start time");
    let ctx = Ctx::new(f, "contention_across_processes").await;
    let mut allocators = Vec::new();
    for _ in 0..each {
        allocators.push(ctx.allocator(name, max, ctx.long).await);
    }
    let wait = start.saturating_sub(unix_ms());
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let tasks: Vec<_> = allocators
        .into_iter()
        .map(|allocator| tokio::spawn(async move { allocator.acquire().await }))
        .collect();
    let mut lines = Vec::new();
    for task in tasks {
        lines.push(match task.await.expect("an acquiring task") {
            Ok(lease) => format!("grant {}", lease.id()),
            Err(Error::NoAvailableId { .. }) => "full".to_string(),
            Err(e) => format!("error {e}"),
        });
    }
    // The answers are this process's report to its parent, on stdout.
    let mut out = std::io::stdout().lock();
    for line in lines {
        writeln!(out, "{ANSWER} {line}").expect("write to stdout");
    }
}
