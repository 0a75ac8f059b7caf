//! The real `workerid-server` binary as the tests drive it: started on a
//! free port with a config file, spoken to over plain sockets.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The tags every test config declares.
pub const TAGS: &str = "[[tags]]\nname = \"test\"\nfirst_id = 1\nstep = 100\n\
                        [[tags]]\nname = \"orders\"\nfirst_id = 5000\n";

pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The server's output (its log, connection errors included).
    pub log: PathBuf,
}

impl Drop for Server {
    /// A test that fails leaves no server behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// How to start a server beyond its store.
#[derive(Default)]
pub struct Launch<'a> {
    /// Top-level TOML lines (before any table).
    pub top: &'a str,
    /// TOML tables after the tags (`[snowflake]` ...).
    pub tables: &'a str,
    /// More command-line arguments.
    pub args: &'a [&'a str],
    /// Environment variables.
    pub env: &'a [(&'a str, &'a str)],
}

impl Server {
    /// The server on a SQLite file in `dir`.
    pub fn start(dir: &Path) -> Server {
        Server::start_with(dir, &[])
    }

    /// As [`Server::start`], with more command-line arguments.
    pub fn start_with(dir: &Path, args: &[&str]) -> Server {
        Server::start_on(dir, &sqlite(dir), args)
    }

    /// The server on the store `store` names, its config file in `dir`.
    pub fn start_on(dir: &Path, store: &str, args: &[&str]) -> Server {
        Server::launch(
            dir,
            store,
            &Launch {
                args,
                ..Launch::default()
            },
        )
    }

    /// The server on `store` as `launch` says, on a free port: another one
    /// if something took the port first (a port free when picked can be
    /// taken, as another process's outgoing connection, before the server
    /// binds it).
    pub fn launch(dir: &Path, store: &str, launch: &Launch<'_>) -> Server {
        let mut refused = Vec::new();
        for _ in 0..3 {
            match Server::try_launch(dir, store, workerid_testkit::free_port(), launch) {
                Ok(server) => return server,
                Err(why) => refused.push(why),
            }
        }
        panic!("no port could be listened on:\n{}", refused.join("\n"));
    }

    fn try_launch(
        dir: &Path,
        store: &str,
        port: u16,
        launch: &Launch<'_>,
    ) -> Result<Server, String> {
        let config = dir.join("server.toml");
        std::fs::write(
            &config,
            format!(
                "store = \"{store}\"\nlisten = \"127.0.0.1:{port}\"\n{}\n{TAGS}{}",
                launch.top, launch.tables
            ),
        )
        .unwrap();
        let log = dir.join(format!("server-{port}-{}.log", std::process::id()));
        // Its log (stdout) and any error it prints (stderr), in one file.
        let output = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_workerid-server"));
        command
            .arg("--config")
            .arg(&config)
            .args(launch.args)
            .env("RUST_LOG", "warn,workerid_server=debug")
            .stdout(output.try_clone().unwrap())
            .stderr(output);
        for (key, value) in launch.env {
            command.env(key, value);
        }
        let child = command.spawn().unwrap();
        let mut server = Server { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        // Ready once it says it listens: a connection that merely succeeds
        // may reach something else.
        let listening = format!("listening on 127.0.0.1:{port}");
        while !server.log_text().contains(&listening) {
            if let Some(status) = server.child.try_wait().unwrap() {
                let why = format!(
                    "the server exited before it listened: {status}\n{}\nlisteners on the port:\n{}",
                    server.log_text(),
                    listeners(port)
                );
                if why.contains("cannot listen on") {
                    return Err(why);
                }
                panic!("{why}");
            }
            assert!(
                Instant::now() < deadline,
                "the server never listened:\n{}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// What the server has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` -> (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        self.try_get(path, &[]).unwrap_or_else(|e| {
            panic!(
                "GET {path}: {e}; the server's log:\n{}\nlisteners on the port:\n{}",
                self.log_text(),
                listeners(self.port)
            )
        })
    }

    /// `GET path` with more header lines -> (status, body), or the socket's error.
    pub fn try_get(&self, path: &str, headers: &[&str]) -> std::io::Result<(u16, String)> {
        self.send("GET", path, headers, "")
    }

    /// `method path` with more header lines and `body` (its
    /// `Content-Length` added when it is not empty) -> (status, body), or
    /// the socket's error.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: impl AsRef<[u8]>,
    ) -> std::io::Result<(u16, String)> {
        let body = body.as_ref();
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for header in headers {
            request.push_str(header);
            request.push_str("\r\n");
        }
        if !body.is_empty() {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        let mut request = request.into_bytes();
        request.extend_from_slice(body);
        let mut text = String::new();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        stream.write_all(&request)?;
        stream.read_to_string(&mut text)?;
        if text.len() < 12 {
            return Err(std::io::Error::other(format!("no answer: {text:?}")));
        }
        let status = text[9..12].parse().map_err(std::io::Error::other)?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((status, body))
    }

    /// The value of metric `name`, summed over its labels.
    pub fn metric(&self, name: &str) -> u64 {
        let (_, metrics) = self.get("/metrics");
        let values: Vec<u64> = metrics
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(name)?;
                let value = match rest.strip_prefix('{') {
                    Some(labelled) => labelled.split_once("} ")?.1,
                    None => rest.strip_prefix(' ')?,
                };
                value.parse().ok()
            })
            .collect();
        assert!(!values.is_empty(), "no {name}:\n{metrics}");
        values.into_iter().sum()
    }

    /// Sends SIGTERM.
    pub fn signal_term(&self) {
        // SAFETY: a plain signal to our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
    }

    /// SIGTERM, then the exit status; panics with the server's log when it
    /// has not exited within 30 s.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        self.signal_term();
        match exit_within(&mut self.child, Duration::from_secs(30)) {
            Some(status) => status,
            None => panic!(
                "the server did not exit within 30 s of SIGTERM; its log:\n{}",
                self.log_text()
            ),
        }
    }
}

/// A SQLite store URL in `dir`.
pub fn sqlite(dir: &Path) -> String {
    workerid_testkit::sqlite_url(&dir.join("ids.db"))
}

/// The server on a SQLite file in `dir` as `launch` says, with the gRPC
/// port on a free port too: the server and that port.
#[allow(dead_code)] // not every test binary that shares this module serves gRPC
pub fn launch_with_grpc(dir: &Path, launch: &Launch) -> (Server, u16) {
    let grpc = workerid_testkit::free_port();
    let top = format!("grpc_listen = \"127.0.0.1:{grpc}\"\n{}", launch.top);
    let launch = Launch {
        top: &top,
        tables: launch.tables,
        args: launch.args,
        env: launch.env,
    };
    (Server::launch(dir, &sqlite(dir), &launch), grpc)
}

/// What listens on `port` (`ss`), for a failure's message.
pub fn listeners(port: u16) -> String {
    Command::new("ss")
        .args(["-ltnp", &format!("sport = :{port}")])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_else(|e| format!("(ss: {e})"))
}

/// Waits up to `limit` for `child` to exit: its status, or None after
/// killing it (SIGKILL) when it was still running.
pub fn exit_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `GET path` every 50 ms until it answers `status`, for up to
/// `limit`; the time it took, or None.
pub fn wait_for_status(
    server: &Server,
    path: &str,
    status: u16,
    limit: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if matches!(server.try_get(path, &[]), Ok((s, _)) if s == status) {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Reads `count` HTTP/1.1 responses (each with a `Content-Length`) from one
/// connection -> their heads and bodies.
pub fn read_responses(stream: &mut TcpStream, count: usize) -> Vec<(String, String)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut responses = Vec::new();
    while responses.len() < count {
        let text = String::from_utf8_lossy(&buffer).into_owned();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or_else(|| panic!("no content-length in {head}"));
            if rest.len() >= length {
                responses.push((head.to_string(), rest[..length].to_string()));
                buffer.drain(..head.len() + 4 + length);
                continue;
            }
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {} responses", responses.len());
        buffer.extend_from_slice(&chunk[..n]);
    }
    responses
}

/// The server's resident memory, in kB.
pub fn rss_kb(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}
