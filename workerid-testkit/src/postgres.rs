//! PostgreSQL: `initdb` and `postgres`, run as the `postgres` user (the server
//! refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::{free_port, run, ServerProcess, ServerSpec};

/// Points the tests at an existing PostgreSQL server instead of starting one.
pub const URL_ENV: &str = "WORKERID_POSTGRES_URL";

/// What a PostgreSQL server offers besides trust authentication for the
/// `postgres` user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PostgresConfig {
    /// TLS (`ssl=on`) with the certificates of [`crate::tls::files`]; the
    /// `postgres` user may then connect over TCP with TLS only (`hostssl`).
    pub tls: bool,
    /// A user [`crate::USER`] with the password [`crate::PASSWORD`] (scram),
    /// owner of a database of the same name, that must give its password
    /// over TCP, with or without TLS.
    pub password_user: bool,
}

/// A PostgreSQL server of its own on a free loopback port, with trust
/// authentication for the `postgres` user.
#[derive(Debug)]
pub struct PostgresServer {
    process: ServerProcess,
    port: u16,
    config: PostgresConfig,
}

pub(crate) fn bin_dir() -> PathBuf {
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
pub(crate) fn postgres_user() -> (u32, u32) {
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

/// `program`, one of the server's binaries, to run as the `postgres` user.
pub(crate) fn as_postgres(program: &str) -> Command {
    let (uid, gid) = postgres_user();
    let mut command = Command::new(bin_dir().join(program));
    std::os::unix::process::CommandExt::uid(&mut command, uid);
    std::os::unix::process::CommandExt::gid(&mut command, gid);
    command
}

/// A fresh data directory at `data` (`initdb`, trust authentication for
/// the `postgres` user).
pub(crate) fn initdb(data: &Path) {
    run(
        as_postgres("initdb")
            .args([
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(data),
        "initdb",
    );
}

/// Whether the server on `port` of 127.0.0.1 accepts connections
/// (`pg_isready`).
pub(crate) fn is_ready(port: u16) -> bool {
    Command::new(bin_dir().join("pg_isready"))
        .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

impl PostgresServer {
    /// Runs `initdb` in a fresh directory, starts `postgres` and waits until
    /// `pg_isready` says it accepts connections.
    pub fn start() -> PostgresServer {
        Self::start_with(PostgresConfig::default())
    }

    /// As [`start`](Self::start), with TLS and a password user as `config` says.
    pub fn start_with(config: PostgresConfig) -> PostgresServer {
        let bin = bin_dir();
        let (uid, gid) = postgres_user();
        let port = free_port();
        let process = ServerProcess::launch("postgres", |dir: &Path| {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown the directory");
            let data = dir.join("data");
            initdb(&data);
            let mut settings = Vec::new();
            if config.tls {
                // The server refuses a key that others may read, or that
                // belongs to another user: copies of its own, mode 0600.
                let files = crate::tls::files();
                for (from, to) in [
                    (files.server_cert(), "server.pem"),
                    (files.server_key(), "server.key"),
                ] {
                    let path = dir.join(to);
                    std::fs::copy(&from, &path).expect("copy the server certificate");
                    std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                        .expect("chown the server certificate");
                    std::fs::set_permissions(
                        &path,
                        std::os::unix::fs::PermissionsExt::from_mode(0o600),
                    )
                    .expect("chmod the server certificate");
                }
                settings.push(("-c", "ssl=on".to_string()));
                settings.push((
                    "-c",
                    format!("ssl_cert_file={}", dir.join("server.pem").display()),
                ));
                settings.push((
                    "-c",
                    format!("ssl_key_file={}", dir.join("server.key").display()),
                ));
            }
            write_hba(&data.join("pg_hba.conf"), config);
            ServerSpec::new(bin.join("postgres"))
                .arg_pairs(&settings)
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
                .ready(move || is_ready(port))
        });
        if config.password_user {
            let mut psql = as_postgres("psql");
            psql.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", "postgres", "-h"])
                .arg(process.dir())
                .args(["-p", &port.to_string(), "-d", "postgres"]);
            let user = crate::USER;
            let password = crate::PASSWORD.replace('\'', "''");
            run(
                psql.arg("-c")
                    .arg(format!("CREATE ROLE {user} LOGIN PASSWORD '{password}'"))
                    .arg("-c")
                    .arg(format!("CREATE DATABASE {user} OWNER {user}")),
                "create the password user",
            );
        }
        PostgresServer {
            process,
            port,
            config,
        }
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// [`url`](Self::url) with `sslmode=verify-full` and the CA of
    /// [`crate::tls::files`] as `sslrootcert`.
    ///
    /// Panics unless the server was started with TLS.
    pub fn tls_url(&self) -> String {
        assert!(
            self.config.tls,
            "tls_url of a PostgreSQL server without TLS"
        );
        format!(
            "{}?sslmode=verify-full&sslrootcert={}",
            self.url(),
            crate::tls::files().ca_cert().display()
        )
    }

    /// `postgres://workerid:<password, percent-encoded>@127.0.0.1:<port>/workerid`.
    ///
    /// Panics unless the server was started with the password user.
    pub fn url_with_password(&self, password: &str) -> String {
        assert!(
            self.config.password_user,
            "url_with_password of a PostgreSQL server without the password user"
        );
        format!(
            "postgres://{user}:{}@127.0.0.1:{}/{user}",
            crate::url_encode(password),
            self.port,
            user = crate::USER
        )
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process, to stop, kill, restart or pause it.
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }
}

/// Replaces the `pg_hba.conf` of `initdb --auth=trust` when `config` asks
/// for more than trust: the password user must give its password (scram),
/// and with TLS the `postgres` user must use it over TCP.
fn write_hba(path: &Path, config: PostgresConfig) {
    if !config.tls && !config.password_user {
        return;
    }
    let mut hba = String::from("local all all trust\n");
    if config.password_user {
        hba.push_str(&format!(
            "host all {} 127.0.0.1/32 scram-sha-256\n",
            crate::USER
        ));
    }
    let tcp = if config.tls { "hostssl" } else { "host" };
    hba.push_str(&format!("{tcp} all all 127.0.0.1/32 trust\n"));
    std::fs::write(path, hba).expect("write pg_hba.conf");
}

/// A server with TLS and the password user, shared by the tests of this
/// binary, started once.
pub fn shared_secure_server() -> &'static PostgresServer {
    static SHARED: OnceLock<&'static PostgresServer> = OnceLock::new();
    SHARED.get_or_init(|| {
        Box::leak(Box::new(PostgresServer::start_with(PostgresConfig {
            tls: true,
            password_user: true,
        })))
    })
}

/// The TLS URL ([`PostgresServer::tls_url`]) of [`shared_secure_server`].
pub fn shared_tls_url() -> String {
    shared_secure_server().tls_url()
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
