//! Redis: a single server (with or without persistence) and a 3-master cluster.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{free_port, require_program, ServerProcess, ServerSpec};

/// Points the tests at an existing Redis server instead of starting one.
pub const URL_ENV: &str = "WORKERID_REDIS_URL";
/// Points the tests at an existing Redis Cluster (comma-separated URLs).
pub const CLUSTER_URLS_ENV: &str = "WORKERID_REDIS_CLUSTER_URLS";

/// How to run a Redis server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedisConfig {
    /// `appendonly yes` with `appendfsync always`: every write is on disk
    /// before it is acknowledged. Off: nothing survives a restart.
    pub persistence: bool,
    /// Run as a Redis Cluster node.
    pub cluster_node: bool,
}

/// A `redis-server` of its own on a free loopback port.
#[derive(Debug)]
pub struct RedisServer {
    process: ServerProcess,
    port: u16,
}

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    pub fn start(config: RedisConfig) -> RedisServer {
        let program = require_program("redis-server", "redis-server");
        let port = free_port();
        let process = ServerProcess::launch("redis", |dir: &Path| {
            let mut args: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--dir",
                &dir.display().to_string(),
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
                "--save",
                "",
                "--logfile",
                "",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let persistence = if config.persistence {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "everysec"]
            };
            args.extend(persistence.iter().map(|s| s.to_string()));
            if config.cluster_node {
                args.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "3000",
                    ]
                    .iter()
                    .map(|s| s.to_string()),
                );
            }
            ServerSpec::new(program)
                .args(args)
                .ready(move || ping(port))
        });
        RedisServer { process, port }
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
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

/// A Redis Cluster of three masters (no replicas), each a [`RedisServer`].
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three nodes, joins them with `redis-cli --cluster create`, and
    /// waits until every node reports `cluster_state:ok`.
    pub fn start(persistence: bool) -> RedisCluster {
        let cli = require_program("redis-cli", "redis-tools");
        let config = RedisConfig {
            persistence,
            cluster_node: true,
        };
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start(config)).collect();
        let mut create = Command::new(&cli);
        create.args(["--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        create.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = create.output().expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_ok();
        cluster
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Waits until every node reports `cluster_state:ok`.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.nodes.iter().all(|n| cluster_ok(n.port)) {
            assert!(
                Instant::now() < deadline,
                "the Redis Cluster never became ok"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The Redis URL the tests of this binary share: `WORKERID_REDIS_URL`, or a
/// server started once (no persistence) and stopped when the binary exits.
pub fn shared_url() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            crate::from_env_or(URL_ENV, || {
                Box::leak(Box::new(RedisServer::start(RedisConfig::default()))).url()
            })
        })
        .clone()
}

/// The cluster URLs the tests of this binary share: `WORKERID_REDIS_CLUSTER_URLS`,
/// or a 3-master cluster started once.
pub fn shared_cluster_urls() -> Vec<String> {
    static SHARED: OnceLock<Vec<String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let urls = crate::from_env_or(CLUSTER_URLS_ENV, || {
                Box::leak(Box::new(RedisCluster::start(false)))
                    .urls()
                    .join(",")
            });
            urls.split(',').map(str::to_string).collect()
        })
        .clone()
}

fn ask(port: u16, request: &[u8]) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(request).ok()?;
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn ping(port: u16) -> bool {
    ask(port, b"PING\r\n").is_some_and(|answer| answer.starts_with("+PONG"))
}

fn cluster_ok(port: u16) -> bool {
    ask(port, b"CLUSTER INFO\r\n").is_some_and(|answer| answer.contains("cluster_state:ok"))
}
