//! The real binary against real stores: Redis, etcd, PostgreSQL and MariaDB from
//! the test harness, SQLite on a temporary file. Leases are made with the
//! library; the binary lists them, force-releases one, manages segment tags
//! and measures latency.

mod support;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use support::{unique, workerid};
use workerid::{Allocator, Error, LeaseOptions};

/// 2024-01-01T00:00:01Z in ms: a watermark the table shows as a date.
const WATERMARK: u64 = 1_704_067_201_000;

fn allocator(
    store: &std::sync::Arc<dyn workerid::LeaseStore>,
    ns: &str,
    ttl: Duration,
) -> Allocator {
    let options = LeaseOptions::new()
        .worker_bits(3)
        .max_lease_time(Duration::from_secs(60))
        .ttl(ttl);
    Allocator::from_arc(store.clone(), ns, options).expect("an allocator")
}

/// `leases --json`, as id -> lease.
fn listed(url: &str, ns: &str) -> BTreeMap<u64, Value> {
    let run = workerid(&["leases", "--store", url, "--namespace", ns, "--json"]).expect(0);
    let json = run.json();
    assert_eq!(json["namespace"], ns);
    assert_eq!(json["max_worker_id"], 7);
    json["leases"]
        .as_array()
        .expect("a leases array")
        .iter()
        .map(|l| (l["id"].as_u64().expect("an id"), l.clone()))
        .collect()
}

/// Everything the CLI does with a store, on the store at `url`.
async fn exercise(url: &str) {
    let store = workerid::open(url)
        .await
        .expect("the store is up")
        .lease_store();
    let ns = unique("cli.");
    // A lease that expires within the test, as short as the store allows.
    let caps = store.capabilities();
    let short_ttl = caps.min_ttl.max(Duration::from_millis(300));
    let long = allocator(&store, &ns, Duration::from_secs(60));
    let short = allocator(&store, &ns, short_ttl);
    let mut held = long.acquire().await.expect("acquire");
    long.renew_with_watermark(&mut held, WATERMARK)
        .await
        .expect("renew");
    let expired = short.acquire().await.expect("acquire");
    let freed = long.acquire().await.expect("acquire");
    long.release_with_watermark(&freed, 5)
        .await
        .expect("release");
    tokio::time::sleep(short_ttl * 2 + caps.expiry_lag).await;

    // The table.
    let run = workerid(&["leases", "--store", url, "--namespace", &ns]).expect(0);
    assert!(
        run.stdout
            .contains("1 live, 1 expired, 1 free, 5 never granted"),
        "{run:#?}"
    );
    let row = run
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{}  ", held.id())))
        .unwrap_or_else(|| panic!("no row for the live ID: {run:#?}"));
    for cell in [
        "live",
        &held.fence().to_string(),
        "2024-01-01T00:00:01.000Z",
    ] {
        assert!(row.contains(cell), "{cell:?} missing from {row:?}");
    }

    // The namespace among the store's namespaces.
    let run = workerid(&["namespaces", "--store", url, "--json"]).expect(0);
    let all = run.json();
    let entry = all
        .as_array()
        .expect("an array")
        .iter()
        .find(|n| n["namespace"] == ns.as_str())
        .unwrap_or_else(|| panic!("{ns} is not listed: {run:#?}"));
    assert_eq!(entry["max_worker_id"], 7, "{run:#?}");
    assert_eq!(entry["live"], 1, "{run:#?}");
    let run = workerid(&["namespaces", "--store", url]).expect(0);
    assert!(run.stdout.contains(&ns), "{run:#?}");

    // The same as JSON, counts included.
    let run = workerid(&["leases", "--store", url, "--namespace", &ns, "--json"]).expect(0);
    let counts = run.json();
    for (count, expected) in [
        ("live", 1),
        ("expired", 1),
        ("free", 1),
        ("never_granted", 5),
    ] {
        assert_eq!(counts[count], expected, "{count}: {run:#?}");
    }
    let leases = listed(url, &ns);
    assert_eq!(leases.len(), 3, "{leases:?}");
    let live = &leases[&u64::from(held.id())];
    assert_eq!(live["state"], "live");
    assert_eq!(live["fence"], held.fence());
    assert_eq!(live["watermark"], WATERMARK);
    assert_eq!(live["watermark_utc"], "2024-01-01T00:00:01.000Z");
    let left = live["remaining_ms"].as_u64().expect("time left");
    assert!((50_000..=60_000).contains(&left), "{left} ms left");
    assert_eq!(leases[&u64::from(expired.id())]["state"], "expired");
    assert_eq!(leases[&u64::from(freed.id())]["state"], "free");
    assert_eq!(leases[&u64::from(freed.id())]["watermark"], 5);

    // A forced release: refused without --force, and nothing changes.
    let id = held.id().to_string();
    let release = |extra: &[&str]| {
        let mut args = vec!["release", "--store", url, "--namespace", &ns, "--id", &id];
        args.extend_from_slice(extra);
        workerid(&args)
    };
    let run = release(&[]).expect(5);
    assert!(run.stderr.contains("--force"), "{run:#?}");
    long.renew(&mut held)
        .await
        .expect("still held after a refused release");

    // A fence that is not the ID's: refused, nothing changes.
    let stale = (held.fence() + 1).to_string();
    let run = release(&["--force", "--fence", &stale]).expect(5);
    assert!(run.stderr.contains("granted again"), "{run:#?}");
    long.renew(&mut held)
        .await
        .expect("still held after a release with a stale fence");
    let fence = held.fence().to_string();
    let run = release(&["--force", "--json", "--fence", &fence]).expect(0);
    let answer = run.json();
    assert_eq!(
        (&answer["released"], &answer["was"]),
        (&Value::Bool(true), &Value::from("live"))
    );
    match long.renew(&mut held).await {
        Err(Error::NotAssigned { .. }) => {}
        other => panic!("the former holder's renew after a forced release: {other:?}"),
    }
    let leases = listed(url, &ns);
    let after = &leases[&u64::from(held.id())];
    assert_eq!(after["state"], "free");
    assert_eq!(after["watermark"], WATERMARK, "the watermark is kept");
    let run = release(&["--force"]).expect(0);
    assert!(run.stdout.contains("nothing to release"), "{run:#?}");
    // The next grant of that ID: a higher fence, and the kept watermark.
    let mut next = long.acquire().await.expect("acquire");
    while next.id() != held.id() {
        next = long.acquire().await.expect("the force-released ID is free");
    }
    assert!(
        next.fence() > held.fence(),
        "{} after {}",
        next.fence(),
        held.fence()
    );
    assert_eq!(next.previous_watermark(), WATERMARK);

    // Bad input and unknown namespaces.
    workerid(&["release", "-s", url, "-n", &ns, "--id", "8", "--force"]).expect(2);
    workerid(&["leases", "-s", url, "-n", "has space"]).expect(2);
    let run = workerid(&["leases", "-s", url, "-n", &unique("never.")]).expect(4);
    assert!(run.stderr.contains("unknown namespace"), "{run:#?}");
    workerid(&[
        "release",
        "-s",
        url,
        "-n",
        &unique("never."),
        "--id",
        "0",
        "--force",
    ])
    .expect(4);

    // Segment tags.
    let tag = unique("t");
    let create = [
        "segments",
        "create",
        &tag,
        "--first-id",
        "100",
        "--step",
        "10",
        "--store",
        url,
    ];
    workerid(&create).expect(0);
    let run = workerid(&create).expect(5);
    assert!(run.stderr.contains("exists already"), "{run:#?}");
    let run = workerid(&["segments", "--store", url, "--json"]).expect(0);
    let tags = run.json();
    let info = tags
        .as_array()
        .expect("a tags array")
        .iter()
        .find(|t| t["tag"] == tag.as_str())
        .unwrap_or_else(|| panic!("{tag} not listed: {run:#?}"));
    assert_eq!(
        (&info["max_id"], &info["step"]),
        (&Value::from(100), &Value::from(10))
    );
    let run = workerid(&["segments", "--store", url]).expect(0);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.split_whitespace().eq([tag.as_str(), "100", "10"])),
        "{run:#?}"
    );
    workerid(&["segments", "create", "bad tag", "--store", url]).expect(2);
    let run = workerid(&["segments", "show", &tag, "--store", url, "--json"]).expect(0);
    let shown = run.json();
    assert_eq!(
        (&shown["max_id"], &shown["step"], &shown["ids_left"]),
        (
            &Value::from(100),
            &Value::from(10),
            &Value::from((1u64 << 63) - 100)
        ),
        "{run:#?}"
    );
    let run = workerid(&["segments", "show", &tag, "--store", url]).expect(0);
    assert!(
        run.stdout.lines().any(|l| l.split_whitespace().eq([
            tag.as_str(),
            "100",
            "10",
            &((1u64 << 63) - 100).to_string()
        ])),
        "{run:#?}"
    );
    let run = workerid(&["segments", "show", &unique("absent"), "--store", url]).expect(4);
    assert!(run.stderr.contains("unknown tag"), "{run:#?}");
    workerid(&["segments", "show", "bad tag", "--store", url]).expect(2);

    // The latency check.
    let run = workerid(&[
        "bench",
        "--store",
        url,
        "--rounds",
        "20",
        "--namespace",
        &unique("bench."),
        "--json",
    ])
    .expect(0);
    let bench = run.json();
    for op in ["acquire", "renew", "release"] {
        let p50 = bench[op]["p50_us"].as_f64().expect("p50");
        let p99 = bench[op]["p99_us"].as_f64().expect("p99");
        assert!(p50 > 0.0 && p50 <= p99, "{op}: {bench}");
    }
    let run = workerid(&["bench", "--store", url, "--rounds", "5"]).expect(0);
    assert!(
        run.stdout.contains("P50") && run.stdout.contains("release"),
        "{run:#?}"
    );
    // A namespace that exists may be a live pool: refused, nothing taken.
    let fences = |url: &str| -> Vec<(u64, Value)> {
        listed(url, &ns)
            .into_iter()
            .map(|(id, lease)| (id, lease["fence"].clone()))
            .collect()
    };
    let before = fences(url);
    let run = workerid(&["bench", "--store", url, "--namespace", &ns]).expect(5);
    assert!(run.stderr.contains("exists"), "{run:#?}");
    assert_eq!(fences(url), before);

    // Removing a namespace: refused without --force and while a lease in it
    // is live, nothing changed; then removed, and unknown afterwards.
    let gone = unique("gone.");
    let pool = allocator(&store, &gone, Duration::from_secs(60));
    let lease = pool.acquire().await.expect("acquire");
    let remove = |extra: &[&str]| {
        let mut args = vec!["namespaces", "remove", &gone, "--store", url];
        args.extend_from_slice(extra);
        workerid(&args)
    };
    let run = remove(&[]).expect(5);
    assert!(run.stderr.contains("--force"), "{run:#?}");
    let run = remove(&["--force"]).expect(5);
    assert!(run.stderr.contains("1 live lease"), "{run:#?}");
    assert_eq!(listed(url, &gone).len(), 1, "nothing was removed");
    pool.release(&lease).await.expect("release");
    let run = remove(&["--force", "--json"]).expect(0);
    assert_eq!(run.json()["removed"], true, "{run:#?}");
    workerid(&["leases", "-s", url, "-n", &gone]).expect(4);
    remove(&["--force"]).expect(4);
    workerid(&["namespaces", "remove", "has space", "--force", "-s", url]).expect(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis() {
    exercise(&workerid_testkit::redis::shared_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_redis_cluster() {
    let nodes: Vec<String> = workerid_testkit::redis::shared_cluster_urls()
        .iter()
        .map(|u| {
            u.trim_start_matches("redis://")
                .trim_end_matches('/')
                .to_string()
        })
        .collect();
    exercise(&format!("redis+cluster://{}", nodes.join(","))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd() {
    let endpoints = workerid_testkit::etcd::shared_endpoints();
    let hosts: Vec<&str> = endpoints
        .iter()
        .map(|e| e.trim_start_matches("http://"))
        .collect();
    exercise(&format!("etcd://{}", hosts.join(","))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    exercise(&workerid_testkit::postgres::shared_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb() {
    exercise(&workerid_testkit::mariadb::shared_url()).await;
}

fn sqlite_url() -> String {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| workerid_testkit::binary_temp_dir("workerid-cli-sqlite-"));
    format!("sqlite://{}", dir.join("ids.db").display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_sqlite_file() {
    let url = sqlite_url();
    // The CLI never creates a database file by itself...
    workerid(&["leases", "--store", &url, "--namespace", "x"]).expect(3);
    // ...the application does, on its first connection.
    workerid::sql::SqlStore::connect(&format!("{url}?mode=rwc"))
        .await
        .expect("create the database");
    exercise(&url).await;
}

/// Each way of failing to open a store has its exit code: credentials
/// refused (7), no such database (4), another protocol at the address (8),
/// and a database without the tables is left untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_to_open_exit_by_cause() {
    use workerid_testkit::{mariadb, postgres, redis, WRONG_PASSWORD};
    let (redis_auth, pg, maria, redis_plain) = tokio::task::spawn_blocking(|| {
        (
            redis::shared_password_server(),
            postgres::shared_secure_server(),
            mariadb::shared_secure_server(),
            redis::shared_url(),
        )
    })
    .await
    .expect("the servers start");
    let right = workerid_testkit::PASSWORD;
    // The same server and user, a database name with a typo in it.
    let typo_database = |url: &str| {
        let (server, _) = url.rsplit_once('/').expect("a database in the URL");
        format!("{server}/typo_db")
    };
    let cases = [
        (redis_auth.url_with_password(WRONG_PASSWORD), 7),
        (pg.url_with_password(WRONG_PASSWORD), 7),
        (maria.url_with_password(WRONG_PASSWORD), 7),
        (typo_database(&pg.url_with_password(right)), 4),
        // MariaDB does not tell a user without rights on it whether a
        // database exists: its credentials are refused.
        (typo_database(&maria.url_with_password(right)), 7),
        (format!("{}99", redis_auth.url_with_password(right)), 4),
        (
            format!(
                "etcd://{}",
                redis_plain
                    .trim_start_matches("redis://")
                    .trim_end_matches('/')
            ),
            8,
        ),
    ];
    // A database file without the tables: read-only commands create nothing.
    let empty = tempfile::NamedTempFile::new().expect("a temporary file");
    let empty_url = format!("sqlite://{}", empty.path().display());
    for args in [vec!["leases", "-n", "x"], vec!["segments"]] {
        let mut args = args.clone();
        args.extend(["--store", empty_url.as_str()]);
        let run = workerid(&args);
        assert_eq!(run.code, 4, "{args:?}: {run:#?}");
        assert!(run.stderr.contains("not initialised"), "{run:#?}");
    }
    assert_eq!(
        empty.as_file().metadata().expect("the file").len(),
        0,
        "nothing written"
    );
    for (url, code) in cases {
        let run = workerid(&["leases", "--store", &url, "-n", "x"]);
        assert_eq!(run.code, code, "{url}: {run:#?}");
        for secret in [right, WRONG_PASSWORD, "Wk%2F", "Wr%2F"] {
            assert!(!run.stderr.contains(secret), "{url}: {run:#?}");
        }
    }
}

/// Ctrl-C stops a bench after the cycle in flight, and it still removes
/// its namespace: exit 130, and no scratch namespace left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_bench_removes_its_namespace() {
    let url = workerid_testkit::redis::shared_url();
    let ns = unique("bench.");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_workerid"))
        .args([
            "bench",
            "--store",
            &url,
            "--namespace",
            &ns,
            "--rounds",
            "100000",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the workerid binary");
    // Until the bench has made its namespace.
    let made = std::time::Instant::now();
    while !workerid(&["namespaces", "--store", &url])
        .stdout
        .contains(&ns)
    {
        if made.elapsed() > Duration::from_secs(20) || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().expect("the bench's output");
            panic!("no namespace {ns}: {out:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(killed.success());
    let out = tokio::task::spawn_blocking(move || {
        let status = child.wait().expect("the bench ends");
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        (status, stderr)
    })
    .await
    .unwrap();
    assert_eq!(out.0.code(), Some(130), "{out:?}");
    assert!(
        out.1.contains(&format!("namespace {ns} removed")),
        "{out:?}"
    );
    let run = workerid(&["namespaces", "--store", &url]).expect(0);
    assert!(!run.stdout.contains(&ns), "{run:#?}");
}
