//! MariaDB: `mariadb-install-db` and `mariadbd --no-defaults --user=root`.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::{free_port, require_program, run, ServerProcess, ServerSpec};

/// Points the tests at an existing MariaDB or MySQL server instead of starting one.
pub const URL_ENV: &str = "WORKERID_MYSQL_URL";

/// The database the harness creates.
pub const DATABASE: &str = "workerid";

/// A MariaDB server of its own on a free loopback port; `root` has no password.
#[derive(Debug)]
pub struct MariaDbServer {
    process: ServerProcess,
    port: u16,
}

impl MariaDbServer {
    /// Installs a fresh data directory, starts `mariadbd`, waits until it
    /// answers, and creates the database [`DATABASE`].
    pub fn start() -> MariaDbServer {
        let install = require_program("mariadb-install-db", "mariadb-server");
        let server = require_program("mariadbd", "mariadb-server");
        let admin = require_program("mariadb-admin", "mariadb-client");
        let client = require_program("mariadb", "mariadb-client");
        let port = free_port();
        let process = ServerProcess::launch("mariadb", |dir: &Path| {
            let data = dir.join("data");
            run(
                Command::new(&install)
                    .arg("--no-defaults")
                    .arg(format!("--datadir={}", data.display()))
                    .args([
                        "--user=root",
                        "--auth-root-authentication-method=normal",
                        "--skip-test-db",
                    ]),
                "mariadb-install-db",
            );
            let port_text = port.to_string();
            ServerSpec::new(server)
                .args([
                    "--no-defaults".to_string(),
                    "--user=root".to_string(),
                    format!("--datadir={}", data.display()),
                    format!("--socket={}", dir.join("mariadb.sock").display()),
                    format!("--pid-file={}", dir.join("mariadb.pid").display()),
                    format!("--port={port}"),
                    "--bind-address=127.0.0.1".to_string(),
                    "--skip-name-resolve".to_string(),
                    "--max-connections=300".to_string(),
                    "--innodb-flush-log-at-trx-commit=1".to_string(),
                ])
                .ready(move || {
                    Command::new(&admin)
                        .args([
                            "--no-defaults",
                            "-h",
                            "127.0.0.1",
                            "-P",
                            &port_text,
                            "-u",
                            "root",
                            "--silent",
                            "ping",
                        ])
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                })
        });
        run(
            Command::new(client)
                .args([
                    "--no-defaults",
                    "-h",
                    "127.0.0.1",
                    "-P",
                    &port.to_string(),
                    "-u",
                    "root",
                    "-e",
                ])
                .arg(format!("CREATE DATABASE IF NOT EXISTS {DATABASE}")),
            "create the database",
        );
        MariaDbServer { process, port }
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
