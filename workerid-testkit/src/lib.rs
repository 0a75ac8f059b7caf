//! # workerid-testkit
//!
//! The test harness: real server processes for tests and benchmarks, never
//! mocks. Each server runs on free loopback ports (never a default port), in a
//! fresh temporary directory, and is waited on until it answers. A server is
//! stopped, and its directory removed, when its handle is dropped or, for the
//! servers shared by a whole test binary, when the binary exits (also after a
//! failed test); a server also dies with the test process if that is killed
//! (Linux parent-death signal).
//!
//! Servers can be stopped, killed, restarted and paused (SIGSTOP / SIGCONT),
//! so fault tests can use them.
//!
//! Every kind of store the harness runs is a [`StoreKind`]: `start()` gives a
//! [`RunningStore`] with the URL that opens it, `shared_url()` the URL of the
//! one every test of the binary shares.
//!
//! ```no_run
//! use workerid_testkit::StoreKind;
//! let postgres = StoreKind::Postgres.start(); // stopped when dropped
//! let url = postgres.url(); // postgres://...
//! let shared = StoreKind::Redis.shared_url();
//! ```
//!
//! ```no_run
//! // The Redis server shared by every test of this binary (or the one
//! // WORKERID_REDIS_URL points at):
//! let url = workerid_testkit::redis::shared_url();
//! // A server of one's own, for a test that kills it:
//! let own = workerid_testkit::redis::RedisServer::start(workerid_testkit::redis::RedisConfig::default());
//! own.process().kill();
//! own.process().start();
//! ```
//!
//! For TLS and credential tests: [`tls`] makes a throwaway CA and
//! certificates; each server module starts TLS servers with them
//! (`shared_tls_url()`, `shared_tls_endpoint()`, ...) and servers that need
//! [`PASSWORD`], a password with a `/` and an `@`.
//!
//! For answers that come late: [`proxy::DelayingProxy`] sits between a
//! client and a server and holds the server's bytes back.
//!
//! For lost packets, partitions and half-open connections over real TCP:
//! [`netns::Netns`] puts clients in a network namespace of their own,
//! linked to the servers by a relay, and drops packets on that link.
//!
//! For disks: [`small_disk::SmallDisk`] fills up,
//! [`failing_disk::FailingDisk`] fails (`EIO`) while it has room, and
//! [`fsync_failing::FsyncFailingDisk`] fails every `fsync` for a while
//! under a file system that stays writable.
//!
//! A missing server program is a test failure with a message that says how to
//! install it (`bash scripts/test.sh` does), never a silent skip.
#![deny(missing_docs)]

mod cleanup;
pub mod etcd;
pub mod failing_disk;
mod fake_clock;
pub mod fsync_failing;
mod holders;
pub mod mariadb;
pub mod netns;
mod ports;
pub mod postgres;
pub mod postgres_standby;
mod process;
pub mod progress;
pub mod proxy;
pub mod redis;
pub mod redis_cluster;
pub mod redis_sentinel;
pub mod relay;
pub mod small_disk;
mod stores;
pub mod tls;

pub use fake_clock::FakeWallClock;
pub use ports::free_port;
pub use process::{ServerProcess, ServerSpec};
pub use stores::{RunningStore, Servers, StoreKind};

/// The password of the password-protected servers' user. It holds a `/` and
/// an `@`, which a URL must percent-encode ([`PASSWORD_IN_URL`]), so that
/// tests see a password leak in its raw form as well as in its encoded form.
pub const PASSWORD: &str = "Wk/pa@ss-9371";
/// [`PASSWORD`] percent-encoded for the user-info part of a URL.
pub const PASSWORD_IN_URL: &str = "Wk%2Fpa%40ss-9371";
/// A password the servers refuse, with a `/` and an `@` too.
pub const WRONG_PASSWORD: &str = "Wr/ong@pw-4412";
/// [`WRONG_PASSWORD`] percent-encoded.
pub const WRONG_PASSWORD_IN_URL: &str = "Wr%2Fong%40pw-4412";
/// The user of the password-protected PostgreSQL and MariaDB servers.
pub const USER: &str = "workerid";

/// A temporary directory named `prefix` and random characters that lasts
/// until the test binary exits, and is removed then (also after a failed
/// test): for a file the tests of one binary share, such as a SQLite
/// database, where a `TempDir` kept in a static would never be dropped.
///
/// ```
/// let dir = workerid_testkit::binary_temp_dir("workerid-doc-");
/// assert!(dir.is_dir());
/// ```
///
/// # Panics
/// When no temporary directory can be made.
pub fn binary_temp_dir(prefix: &str) -> std::path::PathBuf {
    let dir = small_disk::temp_dir(prefix).keep();
    cleanup::register_dir(dir.clone());
    dir
}

/// The URL of the SQLite database in `file`, which opening it creates if
/// it does not exist (`?mode=rwc`).
///
/// ```
/// let url = workerid_testkit::sqlite_url(std::path::Path::new("/tmp/t/ids.db"));
/// assert_eq!(url, "sqlite:///tmp/t/ids.db?mode=rwc");
/// ```
pub fn sqlite_url(file: &std::path::Path) -> String {
    format!("sqlite://{}?mode=rwc", file.display())
}

/// `text` percent-encoded for the user-info part of a URL (everything but
/// ASCII letters, digits and `-._~`).
pub fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of the environment variable `env` when it is set and not empty,
/// else `start()` (which starts a server that lives as long as the test
/// binary and returns its address). Each call site keeps its own `OnceLock`.
pub(crate) fn from_env_or(env: &str, start: impl FnOnce() -> String) -> String {
    match std::env::var(env) {
        Ok(value) if !value.is_empty() => value,
        _ => start(),
    }
}

/// Runs a helper program to completion; panics with its output if it fails
/// or is still running after two minutes.
pub(crate) fn run(command: &mut std::process::Command, what: &str) {
    let out = output_within(command, what, std::time::Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a helper program to completion and returns what it printed; a
/// program still running after `limit` is killed, and the call panics with
/// what it printed until then, so that a helper that never ends fails its
/// test instead of hanging it.
///
/// # Panics
/// When the program cannot be started, or runs past `limit`.
pub(crate) fn output_within(
    command: &mut std::process::Command,
    what: &str,
    limit: std::time::Duration,
) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    // Each pipe drained by a thread of its own, so that a program that
    // prints much never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (sent, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = sent.send(bytes);
        });
        received
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    // A process the program left behind may hold its pipes open: what was
    // printed is taken as it is a second after the end.
    let printed = |received: std::sync::mpsc::Receiver<Vec<u8>>| {
        received
            .recv_timeout(Duration::from_secs(1))
            .unwrap_or_default()
    };
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .unwrap_or_else(|e| panic!("cannot wait for {what}: {e}"))
        {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} was still running after {limit:?}, and was killed; it printed: {}{}",
                String::from_utf8_lossy(&printed(stdout)),
                String::from_utf8_lossy(&printed(stderr))
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: printed(stdout),
        stderr: printed(stderr),
    }
}

/// Panics with an install hint unless `program` is on the PATH (or is a path
/// that exists). Returns its full path.
pub fn require_program(program: &str, debian_package: &str) -> std::path::PathBuf {
    if let Some(full) = find_program(program) {
        return full;
    }
    panic!(
        "`{program}` is not installed: the tests need a real server. Install the Debian \
         package `{debian_package}` (bash scripts/test.sh does it for you)."
    );
}

/// The full path of `program` when it is on the PATH, in `/usr/sbin` or
/// `/sbin` (or is an absolute path that exists).
pub(crate) fn find_program(program: &str) -> Option<std::path::PathBuf> {
    let candidate = std::path::Path::new(program);
    if candidate.is_absolute() {
        return candidate.exists().then(|| candidate.to_path_buf());
    }
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let extra = [
        std::path::PathBuf::from("/usr/sbin"),
        std::path::PathBuf::from("/sbin"),
    ];
    std::env::split_paths(&paths)
        .chain(extra)
        .map(|dir| dir.join(program))
        .find(|full| full.is_file())
}
