//! PostgreSQL: `initdb` and `postgres`, run as the `postgres` user (the server
//! refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::{free_port, run, ServerProcess, ServerSpec};

/// Points the tests at an existing PostgreSQL server instead of starting one.
pub const URL_ENV: &str = "WORKERID_POSTGRES_URL";

/// A PostgreSQL server of its own on a free loopback port, with trust
/// authentication for the `postgres` user.
#[derive(Debug)]
pub struct PostgresServer {
    process: ServerProcess,
    port: u16,
}

fn bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| dir.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    versions.sort_by_key(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0)
    });
    match versions.pop() {
        Some(version) if version.join("bin/postgres").exists() => version.join("bin"),
        _ => panic!(
            "PostgreSQL is not installed: the tests need a real server. Install the Debian \
             package `postgresql` (bash scripts/test.sh does it for you)."
        ),
    }
}

/// The uid and gid of the `postgres` user.
fn postgres_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                ["postgres", _, uid, gid, ..] => Some((uid.parse().ok()?, gid.parse().ok()?)),
                _ => None,
            }
        })
        .expect("the postgres user (created by the postgresql package)")
}

impl PostgresServer {
    /// Runs `initdb` in a fresh directory, starts `postgres` and waits until
    /// `pg_isready` says it accepts connections.
    pub fn start() -> PostgresServer {
        let bin = bin_dir();
        let (uid, gid) = postgres_user();
        let port = free_port();
        let process = ServerProcess::launch("postgres", |dir: &Path| {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown the directory");
            let data = dir.join("data");
            let mut initdb = Command::new(bin.join("initdb"));
            initdb
                .args([
                    "--auth=trust",
                    "--username=postgres",
                    "--encoding=UTF8",
                    "--no-sync",
                    "-D",
                ])
                .arg(&data);
            std::os::unix::process::CommandExt::uid(&mut initdb, uid);
            std::os::unix::process::CommandExt::gid(&mut initdb, gid);
            run(&mut initdb, "initdb");
            let isready = bin.join("pg_isready");
            ServerSpec::new(bin.join("postgres"))
                .arg_pairs(&[
                    ("-D", data.display().to_string()),
                    ("-p", port.to_string()),
                    ("-k", dir.display().to_string()),
                    ("-c", "listen_addresses=127.0.0.1".to_string()),
                    ("-c", "max_connections=200".to_string()),
                    ("-c", "fsync=on".to_string()),
                ])
                .user(uid, gid)
                .stop_signal(libc::SIGINT)
                .ready(move || {
                    Command::new(&isready)
                        .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                        .status()
                        .is_ok_and(|s| s.success())
                })
        });
        PostgresServer { process, port }
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The process, to stop, kill, restart or pause it.
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }
}

/// The PostgreSQL URL the tests of this binary share: `WORKERID_POSTGRES_URL`,
/// or a server started once and stopped when the binary exits.
pub fn shared_url() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            crate::from_env_or(URL_ENV, || {
                Box::leak(Box::new(PostgresServer::start())).url()
            })
        })
        .clone()
}
