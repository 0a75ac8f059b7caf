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
mod programs;
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
pub use programs::require_program;
pub(crate) use programs::{find_program, output_within, run};
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
