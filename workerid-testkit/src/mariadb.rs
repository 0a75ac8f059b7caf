//! MariaDB: `mariadb-install-db` and `mariadbd --no-defaults --user=root`.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::{free_port, require_program, run, ServerProcess, ServerSpec};

/// Points the tests at an existing MariaDB or MySQL server instead of starting one.
pub const URL_ENV: &str = "WORKERID_MYSQL_URL";

/// The database the harness creates.
pub const DATABASE: &str = "workerid";

/// What a MariaDB server offers besides `root` without a password.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MariaDbConfig {
    /// TLS with the certificates of [`crate::tls::files`]; every TCP
    /// connection must then use it (`require-secure-transport`).
    pub tls: bool,
    /// A user [`crate::USER`] with the password [`crate::PASSWORD`], allowed
    /// everything on [`DATABASE`].
    pub password_user: bool,
}

/// A MariaDB server of its own on a free loopback port; `root` has no password.
#[derive(Debug)]
pub struct MariaDbServer {
    process: ServerProcess,
    port: u16,
    config: MariaDbConfig,
}

impl MariaDbServer {
    /// Installs a fresh data directory, starts `mariadbd`, waits until it
    /// answers, and creates the database [`DATABASE`].
    pub fn start() -> MariaDbServer {
        Self::start_with(MariaDbConfig::default())
    }

    /// As [`start`](Self::start), with TLS and a password user as `config` says.
    pub fn start_with(config: MariaDbConfig) -> MariaDbServer {
        let install = require_program("mariadb-install-db", "mariadb-server");
        let server = require_program("mariadbd", "mariadb-server");
        let admin = require_program("mariadb-admin", "mariadb-client");
        let client = require_program("mariadb", "mariadb-client");
        let port = free_port();
        let process = ServerProcess::launch("mariadb", |dir: &Path| {
            let data = dir.join("data");
            // A temporary directory of each server's own: `mariadbd` deletes
            // every `#sql*` file in its tmpdir when it starts, which in a
            // shared /tmp are the temporary tables of the servers running
            // beside it (an install running at the same time then fails on
            // "Unknown table 'mysql.tmp_user_sys'").
            let tmp = dir.join("tmp");
            if let Err(e) = std::fs::create_dir_all(&tmp) {
                panic!("cannot create {}: {e}", tmp.display());
            }
            run(
                Command::new(&install)
                    .arg("--no-defaults")
                    .arg(format!("--datadir={}", data.display()))
                    .arg(format!("--tmpdir={}", tmp.display()))
                    .args([
                        "--user=root",
                        "--auth-root-authentication-method=normal",
                        "--skip-test-db",
                    ]),
                "mariadb-install-db",
            );
            let socket = dir.join("mariadb.sock");
            let mut tls_args = Vec::new();
            if config.tls {
                let files = crate::tls::files();
                tls_args = vec![
                    format!("--ssl-cert={}", files.server_cert().display()),
                    format!("--ssl-key={}", files.server_key().display()),
                    format!("--ssl-ca={}", files.ca_cert().display()),
                    "--require-secure-transport=ON".to_string(),
                ];
            }
            ServerSpec::new(server)
                .args([
                    "--no-defaults".to_string(),
                    "--user=root".to_string(),
                    format!("--datadir={}", data.display()),
                    format!("--tmpdir={}", tmp.display()),
                    format!("--socket={}", dir.join("mariadb.sock").display()),
                    format!("--pid-file={}", dir.join("mariadb.pid").display()),
                    format!("--port={port}"),
                    "--bind-address=127.0.0.1".to_string(),
                    "--skip-name-resolve".to_string(),
                    "--max-connections=300".to_string(),
                    "--innodb-flush-log-at-trx-commit=1".to_string(),
                ])
                // After the others: `--no-defaults` must come first.
                .args(tls_args)
                .ready(move || {
                    // The socket, not TCP: it needs no TLS on a server that
                    // requires it over TCP.
                    Command::new(&admin)
                        .arg("--no-defaults")
                        .arg(format!("--socket={}", socket.display()))
                        // Its default waits 12 hours for a server that
                        // accepts and never answers.
                        .args(["--connect-timeout=2", "-u", "root", "--silent", "ping"])
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                })
        });
        let mut sql = format!("CREATE DATABASE IF NOT EXISTS {DATABASE};");
        if config.password_user {
            let password = crate::PASSWORD.replace('\'', "''");
            sql.push_str(&format!(
                "CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}';\
                 GRANT ALL ON {DATABASE}.* TO '{user}'@'127.0.0.1';",
                user = crate::USER
            ));
        }
        run(
            Command::new(client)
                .arg("--no-defaults")
                .arg(format!(
                    "--socket={}",
                    process.dir().join("mariadb.sock").display()
                ))
                .args(["--connect-timeout=10", "-u", "root", "-e"])
                .arg(sql),
            "create the database",
        );
        MariaDbServer {
            process,
            port,
            config,
        }
    }

    /// [`url`](Self::url) with `ssl-mode=VERIFY_IDENTITY` and the CA of
    /// [`crate::tls::files`] as `ssl-ca`.
    ///
    /// Panics unless the server was started with TLS.
    pub fn tls_url(&self) -> String {
        assert!(self.config.tls, "tls_url of a MariaDB server without TLS");
        format!(
            "{}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
            self.url(),
            crate::tls::files().ca_cert().display()
        )
    }

    /// `mysql://workerid:<password, percent-encoded>@127.0.0.1:<port>/workerid`.
    ///
    /// Panics unless the server was started with the password user.
    pub fn url_with_password(&self, password: &str) -> String {
        assert!(
            self.config.password_user,
            "url_with_password of a MariaDB server without the password user"
        );
        format!(
            "mysql://{}:{}@127.0.0.1:{}/{DATABASE}",
            crate::USER,
            crate::url_encode(password),
            self.port
        )
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://root@127.0.0.1:<port>/workerid`.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The process, to stop, kill, restart or pause it.
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }
}

/// A server with TLS and the password user, shared by the tests of this
/// binary, started once.
pub fn shared_secure_server() -> &'static MariaDbServer {
    static SHARED: OnceLock<&'static MariaDbServer> = OnceLock::new();
    SHARED.get_or_init(|| {
        Box::leak(Box::new(MariaDbServer::start_with(MariaDbConfig {
            tls: true,
            password_user: true,
        })))
    })
}

/// The TLS URL ([`MariaDbServer::tls_url`]) of [`shared_secure_server`].
pub fn shared_tls_url() -> String {
    shared_secure_server().tls_url()
}

/// The MariaDB URL the tests of this binary share: `WORKERID_MYSQL_URL`, or a
/// server started once and stopped when the binary exits.
pub fn shared_url() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            crate::from_env_or(URL_ENV, || {
                Box::leak(Box::new(MariaDbServer::start())).url()
            })
        })
        .clone()
}
