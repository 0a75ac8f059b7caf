//! Redis: a single server (with or without persistence, TLS or a password)
//! and a 3-master cluster (plain or TLS).

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
    /// Start as a replica of the server on this loopback port.
    pub replica_of: Option<u16>,
    /// As a cluster node: how long a node may not answer before the others
    /// count it failed (`cluster-node-timeout`); None is 3 s.
    pub cluster_node_timeout: Option<Duration>,
}

/// Whether a TLS server asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCerts {
    /// A client may present a certificate (then it must be signed by the CA).
    Optional,
    /// A client must present a certificate signed by the CA.
    Required,
}

/// A `redis-server` of its own on a free loopback port.
#[derive(Debug)]
pub struct RedisServer {
    process: ServerProcess,
    port: u16,
    tls_port: Option<u16>,
    password: bool,
}

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    pub fn start(config: RedisConfig) -> RedisServer {
        Self::launch(config, None, false)
    }

    /// Starts a durable master (AOF, `appendfsync always`) and a durable
    /// replica of it: `(master, replica)`.
    pub fn start_durable_pair() -> (RedisServer, RedisServer) {
        let durable = RedisConfig {
            persistence: true,
            ..RedisConfig::default()
        };
        let master = RedisServer::start(durable);
        let replica = RedisServer::start(RedisConfig {
            replica_of: Some(master.port()),
            ..durable
        });
        (master, replica)
    }

    /// Starts a server that also listens for TLS on a port of its own
    /// ([`tls_url`](Self::tls_url)), with the certificates of
    /// [`crate::tls::files`]. The plain port stays open on 127.0.0.1 for the
    /// readiness probe and for tools.
    pub fn start_tls(config: RedisConfig, client_certs: ClientCerts) -> RedisServer {
        Self::launch(config, Some(client_certs), false)
    }

    /// Starts a server that requires [`crate::PASSWORD`] (`requirepass`).
    pub fn start_with_password(config: RedisConfig) -> RedisServer {
        Self::launch(config, None, true)
    }

    fn launch(config: RedisConfig, tls: Option<ClientCerts>, password: bool) -> RedisServer {
        let program = require_program("redis-server", "redis-server");
        let port = free_port();
        let tls_port = tls.map(|_| free_port());
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
                let timeout = config
                    .cluster_node_timeout
                    .unwrap_or(Duration::from_secs(3))
                    .as_millis();
                args.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        &timeout.to_string(),
                    ]
                    .iter()
                    .map(|s| s.to_string()),
                );
            }
            if let Some(master) = config.replica_of {
                args.push("--replicaof".to_string());
                args.push("127.0.0.1".to_string());
                args.push(master.to_string());
            }
            if let (Some(tls_port), Some(client_certs)) = (tls_port, tls) {
                let files = crate::tls::files();
                let auth = match client_certs {
                    ClientCerts::Optional => "optional",
                    ClientCerts::Required => "yes",
                };
                for (flag, value) in [
                    ("--tls-port", tls_port.to_string()),
                    ("--tls-cert-file", files.server_cert().display().to_string()),
                    ("--tls-key-file", files.server_key().display().to_string()),
                    ("--tls-ca-cert-file", files.ca_cert().display().to_string()),
                    ("--tls-auth-clients", auth.to_string()),
                ] {
                    args.push(flag.to_string());
                    args.push(value);
                }
                if config.cluster_node {
                    // Nodes dial each other's TLS bus as clients. The server
                    // certificate is valid for server authentication only, so
                    // a node presenting it would be refused by its peers; it
                    // presents the client certificate instead.
                    for (flag, value) in [
                        ("--tls-cluster", "yes".to_string()),
                        ("--tls-replication", "yes".to_string()),
                        (
                            "--tls-client-cert-file",
                            files.client_cert().display().to_string(),
                        ),
                        (
                            "--tls-client-key-file",
                            files.client_key().display().to_string(),
                        ),
                    ] {
                        args.push(flag.to_string());
                        args.push(value);
                    }
                }
            }
            if password {
                args.push("--requirepass".to_string());
                args.push(crate::PASSWORD.to_string());
            }
            ServerSpec::new(program)
                .args(args)
                .ready(move || ping(port))
        });
        RedisServer {
            process,
            port,
            tls_port,
            password,
        }
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `rediss://127.0.0.1:<TLS port>/`.
    ///
    /// Panics unless the server was started with [`start_tls`](Self::start_tls).
    pub fn tls_url(&self) -> String {
        let port = self
            .tls_port
            .expect("tls_url of a Redis server started without TLS");
        format!("rediss://127.0.0.1:{port}/")
    }

    /// `redis://:<password, percent-encoded>@127.0.0.1:<port>/`: with
    /// [`crate::PASSWORD`] it works on a server started with
    /// [`start_with_password`](Self::start_with_password).
    pub fn url_with_password(&self, password: &str) -> String {
        assert!(
            self.password,
            "url_with_password of a Redis server started without a password"
        );
        format!(
            "redis://:{}@127.0.0.1:{}/",
            crate::url_encode(password),
            self.port
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

/// A Redis Cluster of three masters (no replicas), each a [`RedisServer`]
/// (with a replica per master:
/// [`RedisReplicatedCluster`](crate::redis_cluster::RedisReplicatedCluster)).
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three nodes, joins them with `redis-cli --cluster create`, and
    /// waits until every node reports `cluster_state:ok`.
    pub fn start(persistence: bool) -> RedisCluster {
        let config = RedisConfig {
            persistence,
            cluster_node: true,
            ..RedisConfig::default()
        };
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start(config)).collect();
        Self::create(nodes, false)
    }

    /// Starts three TLS nodes (as [`RedisServer::start_tls`], client
    /// certificates optional) whose cluster bus and replication run over TLS
    /// too (`tls-cluster yes`, `tls-replication yes`), joins them over TLS
    /// with `redis-cli --tls --cluster create`, and waits until every node
    /// reports `cluster_state:ok`.
    ///
    /// A TLS client is told the nodes' TLS ports (`CLUSTER SLOTS`, `MOVED`),
    /// a plain client their plain ports: [`tls_urls`](Self::tls_urls) and
    /// [`urls`](Self::urls) both reach the whole cluster.
    pub fn start_tls(persistence: bool) -> RedisCluster {
        let config = RedisConfig {
            persistence,
            cluster_node: true,
            ..RedisConfig::default()
        };
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start_tls(config, ClientCerts::Optional))
            .collect();
        let cluster = Self::create(nodes, true);
        cluster.check_tls_slots();
        cluster
    }

    /// Joins `nodes` into a cluster, through their TLS ports if `tls`.
    fn create(nodes: Vec<RedisServer>, tls: bool) -> RedisCluster {
        join_cluster(&nodes, tls, 0);
        let cluster = RedisCluster { nodes };
        cluster.wait_ok();
        cluster
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Asks a node over TLS for `CLUSTER SLOTS` and checks that it names
    /// every node's TLS port: a cluster client follows those ports, so a
    /// server that answered with the plain ones would fail the tests far from
    /// the cause.
    fn check_tls_slots(&self) {
        let cli = require_program("redis-cli", "redis-tools");
        let first = self.nodes[0]
            .tls_port
            .expect("a TLS node has a TLS port")
            .to_string();
        let out = Command::new(&cli)
            .arg("--tls")
            .arg("--cacert")
            .arg(crate::tls::files().ca_cert())
            .args(["-h", "127.0.0.1", "-p", &first, "CLUSTER", "SLOTS"])
            .output()
            .expect("run redis-cli CLUSTER SLOTS");
        let answer = String::from_utf8_lossy(&out.stdout);
        let ports: Vec<&str> = answer.lines().map(str::trim).collect();
        for node in &self.nodes {
            let tls_port = node.tls_port.expect("a TLS node has a TLS port");
            assert!(
                ports.contains(&tls_port.to_string().as_str()),
                "CLUSTER SLOTS over TLS does not name the TLS port {tls_port}: {answer}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Every node's `rediss://127.0.0.1:<TLS port>/` URL.
    ///
    /// Panics unless the cluster was started with [`start_tls`](Self::start_tls).
    pub fn tls_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::tls_url).collect()
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

/// The `rediss://` URL of a TLS server (client certificates optional)
/// shared by the tests of this binary, started once.
pub fn shared_tls_url() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            Box::leak(Box::new(RedisServer::start_tls(
                RedisConfig::default(),
                ClientCerts::Optional,
            )))
            .tls_url()
        })
        .clone()
}

/// A TLS server that requires client certificates, shared by the tests of
/// this binary, started once; its `rediss://` URL.
pub fn shared_mtls_url() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            Box::leak(Box::new(RedisServer::start_tls(
                RedisConfig::default(),
                ClientCerts::Required,
            )))
            .tls_url()
        })
        .clone()
}

/// A server that requires [`crate::PASSWORD`], shared by the tests of this
/// binary, started once (build its URLs with
/// [`RedisServer::url_with_password`]).
pub fn shared_password_server() -> &'static RedisServer {
    static SHARED: OnceLock<&'static RedisServer> = OnceLock::new();
    SHARED.get_or_init(|| {
        Box::leak(Box::new(RedisServer::start_with_password(
            RedisConfig::default(),
        )))
    })
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

/// The `rediss://` URLs of a TLS cluster ([`RedisCluster::start_tls`], no
/// persistence) shared by the tests of this binary, started once.
pub fn shared_tls_cluster_urls() -> Vec<String> {
    static SHARED: OnceLock<Vec<String>> = OnceLock::new();
    SHARED
        .get_or_init(|| Box::leak(Box::new(RedisCluster::start_tls(false))).tls_urls())
        .clone()
}

/// Joins `nodes` into a cluster with `redis-cli --cluster create` (through
/// their TLS ports if `tls`), with `replicas` replicas per master: the
/// first `nodes.len() / (replicas + 1)` nodes are the masters.
pub(crate) fn join_cluster(nodes: &[RedisServer], tls: bool, replicas: u32) {
    let cli = require_program("redis-cli", "redis-tools");
    let mut create = Command::new(&cli);
    if tls {
        create
            .arg("--tls")
            .arg("--cacert")
            .arg(crate::tls::files().ca_cert());
    }
    create.args(["--cluster", "create"]);
    for node in nodes {
        let port = if tls {
            node.tls_port.expect("a TLS node has a TLS port")
        } else {
            node.port
        };
        create.arg(format!("127.0.0.1:{port}"));
    }
    create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
    // redis-cli waits without end for nodes that never agree on the
    // cluster's configuration.
    let out = crate::output_within(
        &mut create,
        "redis-cli --cluster create",
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "redis-cli --cluster create failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sends `request` (an inline command) to the server on `port` and returns
/// its answer as text: a bulk string (`CLUSTER NODES`, `INFO`) whole, any
/// other answer as the first read gives it. None if the server does not
/// answer within a second.
pub(crate) fn ask(port: u16, request: &[u8]) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(request).ok()?;
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        let n = stream.read(&mut buf).ok()?;
        answer.extend_from_slice(&buf[..n]);
        if n == 0 || whole(&answer) {
            return Some(String::from_utf8_lossy(&answer).into_owned());
        }
    }
}

/// Whether `answer` is a whole reply: a bulk string once its announced
/// length has arrived, anything else at once.
fn whole(answer: &[u8]) -> bool {
    if answer.first() != Some(&b'$') {
        return true;
    }
    let Some(header) = answer.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    let length = std::str::from_utf8(&answer[1..header])
        .ok()
        .and_then(|n| n.parse::<i64>().ok());
    match length {
        Some(n) if n >= 0 => answer.len() >= header + 2 + n as usize + 2,
        _ => true,
    }
}

/// Whether the server answers; one that asks for a password answers too.
pub(crate) fn ping(port: u16) -> bool {
    ask(port, b"PING\r\n")
        .is_some_and(|answer| answer.starts_with("+PONG") || answer.starts_with("-NOAUTH"))
}

pub(crate) fn cluster_ok(port: u16) -> bool {
    ask(port, b"CLUSTER INFO\r\n").is_some_and(|answer| answer.contains("cluster_state:ok"))
}
