//! etcd: a single node and a 3-node cluster, each node on its own free client
//! and peer ports, with its data directory in the node's temporary directory.
//!
//! Heartbeat 50 ms and election timeout 500 ms (instead of 100 ms / 1 s), so
//! that a killed leader is replaced within about a second.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::netns::Netns;
use crate::{free_port, ServerProcess, ServerSpec};

/// Points the tests at an existing etcd (comma-separated client URLs).
pub const URL_ENV: &str = "WORKERID_ETCD_ENDPOINTS";
/// Points the tests at an existing 3-node etcd cluster (comma-separated client URLs).
pub const CLUSTER_URL_ENV: &str = "WORKERID_ETCD_CLUSTER_ENDPOINTS";
/// Runs another etcd program than [`INSTALLED_PROGRAM`] (a path).
pub const PROGRAM_ENV: &str = "WORKERID_ETCD_PROGRAM";
/// The etcd that `scripts/setup.sh` installs: Debian 13's (trixie)
/// `etcd-server` (etcd 3.5), unpacked outside the machine's own packages.
pub const INSTALLED_PROGRAM: &str = "/usr/local/lib/workerid/etcd/etcd";

/// The etcd program the test kit starts: `WORKERID_ETCD_PROGRAM`, else
/// [`INSTALLED_PROGRAM`].
///
/// Panics when it is not there, saying how to install it.
pub fn program() -> PathBuf {
    if let Some(path) = std::env::var_os(PROGRAM_ENV) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{PROGRAM_ENV} names {}, which is not a file",
            path.display()
        );
        return path;
    }
    let path = PathBuf::from(INSTALLED_PROGRAM);
    assert!(
        path.is_file(),
        "etcd is not installed at {INSTALLED_PROGRAM}: the tests need a real server. \
         `bash scripts/setup.sh` installs Debian 13's etcd 3.5 there (bash scripts/test.sh \
         runs it for you); {PROGRAM_ENV} names another etcd program."
    );
    path
}

/// How clients reach an etcd member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientTls {
    /// Plain HTTP/2.
    None,
    /// TLS with the server certificate of [`crate::tls::files`].
    Server,
    /// TLS, and every client must present a certificate signed by the CA
    /// (`--client-cert-auth`).
    Mutual,
}

/// One etcd member.
#[derive(Debug)]
pub struct EtcdNode {
    process: ServerProcess,
    name: String,
    /// The address it listens on: 127.0.0.1, or its namespace's.
    host: Ipv4Addr,
    client_port: u16,
    /// Where `/health` answers over plain HTTP: the client port, or a
    /// metrics port of its own when clients need TLS.
    probe_port: u16,
    tls: ClientTls,
}

impl EtcdNode {
    /// `http://127.0.0.1:<client port>`, or `https://` for a TLS member.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls == ClientTls::None {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}:{}", self.host, self.client_port)
    }

    /// The address clients reach it at.
    pub fn client_address(&self) -> SocketAddr {
        SocketAddr::from((self.host, self.client_port))
    }

    /// The member name (`n0`, `n1`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process, to stop, kill, restart or pause it.
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }

    /// Whether the member answers `/health` with `"health":"true"` (it has a
    /// leader and can serve linearizable requests).
    pub fn healthy(&self) -> bool {
        health(self.host, self.probe_port)
    }

    /// The member's Prometheus metrics (`/metrics`, as its HTTP answer), or
    /// None when it does not answer. Blocks for up to two seconds.
    pub fn metrics(&self) -> Option<String> {
        http(
            self.host,
            self.probe_port,
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
    }

    /// Whether this member is the leader, per its `/v3/maintenance/status`.
    pub fn is_leader(&self) -> bool {
        if self.tls != ClientTls::None {
            return false;
        }
        let answer = http_post(self.host, self.client_port, "/v3/maintenance/status", "{}");
        let (Some(leader), Some(member)) = (
            answer.as_deref().and_then(|a| json_field(a, "leader")),
            answer.as_deref().and_then(|a| json_field(a, "member_id")),
        ) else {
            return false;
        };
        leader == member
    }
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    site: Site,
}

/// Where a member runs: on loopback, or in a network namespace of its own.
struct Site {
    /// The address it listens on.
    host: Ipv4Addr,
    /// The peer URL the other members reach it at.
    peer_url: String,
    /// Its namespace, when not the root namespace's loopback.
    netns: Option<Arc<Netns>>,
}

fn launch(
    member: &Member,
    initial_cluster: &str,
    token: &str,
    alone: bool,
    tls: ClientTls,
) -> EtcdNode {
    let program = program();
    let scheme = if tls == ClientTls::None {
        "http"
    } else {
        "https"
    };
    let host = member.site.host;
    let client = format!("{scheme}://{host}:{}", member.client_port);
    let peer = format!("http://{host}:{}", member.peer_port);
    let mut tls_args = Vec::new();
    let mut extra_args = Vec::new();
    let mut port = member.client_port;
    if tls != ClientTls::None {
        let files = crate::tls::files();
        // The metrics listener serves `/health` over plain HTTP: the
        // readiness probe needs no TLS client.
        port = free_port();
        tls_args.push(("--listen-metrics-urls", format!("http://{host}:{port}")));
        tls_args.push(("--cert-file", files.server_cert().display().to_string()));
        tls_args.push(("--key-file", files.server_key().display().to_string()));
        if tls == ClientTls::Mutual {
            tls_args.push(("--trusted-ca-file", files.ca_cert().display().to_string()));
            // A boolean flag: `--flag value` would end the flags at "true".
            extra_args.push("--client-cert-auth=true");
        }
    }
    let netns = member.site.netns.clone();
    let peer_url = member.site.peer_url.clone();
    let process = ServerProcess::launch(&format!("etcd-{}", member.name), |dir: &Path| {
        let spec = match &netns {
            Some(netns) => {
                let (ip, prefix) = netns.exec_prefix();
                ServerSpec::new(ip).args(prefix).args([program.clone()])
            }
            None => ServerSpec::new(program.clone()),
        };
        let spec = spec.args(extra_args).arg_pairs(&tls_args).arg_pairs(&[
            ("--name", member.name.clone()),
            ("--data-dir", dir.join("data").display().to_string()),
            ("--listen-client-urls", client.clone()),
            ("--advertise-client-urls", client.clone()),
            ("--listen-peer-urls", peer.clone()),
            ("--initial-advertise-peer-urls", peer_url.clone()),
            ("--initial-cluster", initial_cluster.to_string()),
            ("--initial-cluster-state", "new".to_string()),
            ("--initial-cluster-token", token.to_string()),
            ("--heartbeat-interval", "50".to_string()),
            ("--election-timeout", "500".to_string()),
            ("--logger", "zap".to_string()),
            ("--log-level", "warn".to_string()),
        ]);
        // A lone member is ready when it serves; a cluster member as soon as
        // it listens (it cannot serve before a quorum of its peers runs).
        if alone {
            spec.ready(move || health(host, port))
        } else {
            spec.ready(move || TcpStream::connect((host, port)).is_ok())
        }
        .ready_timeout(Duration::from_secs(60))
    });
    EtcdNode {
        process,
        name: member.name.clone(),
        host,
        client_port: member.client_port,
        probe_port: port,
        tls,
    }
}

fn members(n: usize) -> Vec<Member> {
    (0..n)
        .map(|i| {
            let peer_port = free_port();
            Member {
                name: format!("n{i}"),
                client_port: free_port(),
                peer_port,
                site: Site {
                    host: Ipv4Addr::LOCALHOST,
                    peer_url: format!("http://127.0.0.1:{peer_port}"),
                    netns: None,
                },
            }
        })
        .collect()
}

/// `n` members, each in a network namespace of its own (listening on its
/// end of the link), whose peers reach it through a relay on the link's
/// host end; with each relay's address.
fn members_apart(n: usize) -> Vec<(Member, SocketAddr)> {
    (0..n)
        .map(|i| {
            let netns = Arc::new(Netns::new());
            netns.route_through_host();
            let host = netns.namespace_address();
            let (client_port, peer_port) = (free_port(), free_port());
            let relay = netns.forward(SocketAddr::from((host, peer_port)));
            let member = Member {
                name: format!("n{i}"),
                client_port,
                peer_port,
                site: Site {
                    host,
                    peer_url: format!("http://{relay}"),
                    netns: Some(netns),
                },
            };
            (member, relay)
        })
        .collect()
}

fn initial_cluster(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| format!("{}={}", m.name, m.site.peer_url))
        .collect::<Vec<_>>()
        .join(",")
}

fn cluster_token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("workerid-{}-{nanos}", std::process::id())
}

/// A single etcd node.
#[derive(Debug)]
pub struct EtcdServer {
    node: EtcdNode,
}

impl EtcdServer {
    /// Starts a one-member cluster and waits until it is healthy.
    pub fn start() -> EtcdServer {
        Self::start_with(ClientTls::None)
    }

    /// Starts a one-member cluster whose clients use TLS as `tls` says,
    /// with the certificates of [`crate::tls::files`].
    pub fn start_with(tls: ClientTls) -> EtcdServer {
        let members = members(1);
        let node = launch(
            &members[0],
            &initial_cluster(&members),
            &cluster_token(),
            true,
            tls,
        );
        EtcdServer { node }
    }

    /// Starts a one-member cluster with authentication enabled: the user
    /// `root` (role `root`) with the password [`crate::PASSWORD`].
    pub fn start_with_auth() -> EtcdServer {
        let server = Self::start();
        let port = server.node.client_port;
        let user = format!(r#"{{"name":"root","password":"{}"}}"#, crate::PASSWORD);
        for (path, body) in [
            ("/v3/auth/user/add", user.as_str()),
            ("/v3/auth/role/add", r#"{"name":"root"}"#),
            ("/v3/auth/user/grant", r#"{"user":"root","role":"root"}"#),
            ("/v3/auth/enable", "{}"),
        ] {
            let answer = http_post(Ipv4Addr::LOCALHOST, port, path, body).unwrap_or_default();
            assert!(
                answer.starts_with("HTTP/1.1 200"),
                "etcd {path} failed: {answer}"
            );
        }
        server
    }

    /// The client endpoint, `http://127.0.0.1:<port>` (`https://` with TLS).
    pub fn endpoint(&self) -> String {
        self.node.endpoint()
    }

    /// The process, to stop, kill, restart or pause it.
    pub fn process(&self) -> &ServerProcess {
        self.node.process()
    }

    /// Its one member.
    pub fn node(&self) -> &EtcdNode {
        &self.node
    }
}

/// A 3-member etcd cluster: on loopback, or each member apart in a
/// network namespace of its own ([`EtcdCluster::start_apart`]).
#[derive(Debug)]
pub struct EtcdCluster {
    nodes: Vec<EtcdNode>,
    /// For members apart: each one's namespace and the address of the
    /// relay its peers reach it through (dropped after the members).
    apart: Vec<(Arc<Netns>, SocketAddr)>,
}

impl EtcdCluster {
    /// Starts three members on loopback and waits until every one is
    /// healthy.
    pub fn start() -> EtcdCluster {
        Self::launch_all(members(3), Vec::new())
    }

    /// Starts three members, each in a network namespace of its own
    /// (`workerid_testkit::netns`, needs root), listening on its
    /// namespace's address, which the root namespace reaches; the members
    /// reach each other through relays in the root namespace, so that one
    /// can be cut from the others ([`isolate`](Self::isolate)) while its
    /// clients still reach it. Waits until every one is healthy.
    ///
    /// # Panics
    /// As [`Netns::new`], and when the cluster does not become healthy.
    pub fn start_apart() -> EtcdCluster {
        let (members, relays): (Vec<Member>, Vec<SocketAddr>) =
            members_apart(3).into_iter().unzip();
        let apart = members
            .iter()
            .zip(relays)
            .filter_map(|(m, relay)| Some((m.site.netns.clone()?, relay)))
            .collect();
        Self::launch_all(members, apart)
    }

    fn launch_all(members: Vec<Member>, apart: Vec<(Arc<Netns>, SocketAddr)>) -> EtcdCluster {
        let cluster = initial_cluster(&members);
        let token = cluster_token();
        let nodes = members
            .iter()
            .map(|m| launch(m, &cluster, &token, false, ClientTls::None))
            .collect();
        let cluster = EtcdCluster { nodes, apart };
        cluster.wait_healthy(Duration::from_secs(60));
        cluster
    }

    /// Whether the members run apart ([`start_apart`](Self::start_apart)).
    pub fn is_apart(&self) -> bool {
        !self.apart.is_empty()
    }

    /// Cuts member `name` from the other members, both ways (its clients
    /// still reach it, and it them), until [`heal`](Self::heal). Replaces
    /// any cut in force.
    ///
    /// # Panics
    /// For a cluster on loopback, or a name that is no member's.
    pub fn isolate(&self, name: &str) {
        assert!(
            self.is_apart(),
            "only members apart can be cut from each other"
        );
        let index = self
            .nodes
            .iter()
            .position(|n| n.name == name)
            .unwrap_or_else(|| panic!("no member {name}"));
        let (_, isolated_relay) = self.apart[index];
        for (i, (netns, _)) in self.apart.iter().enumerate() {
            if i == index {
                let others: Vec<SocketAddr> = self
                    .apart
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != index)
                    .map(|(_, (_, relay))| *relay)
                    .collect();
                netns.cut_from(&others);
            } else {
                netns.cut_from(&[isolated_relay]);
            }
        }
    }

    /// Joins every member with the others again.
    pub fn heal(&self) {
        for (netns, _) in &self.apart {
            netns.heal();
        }
    }

    /// Every member's client endpoint.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(EtcdNode::endpoint).collect()
    }

    /// The members.
    pub fn nodes(&self) -> &[EtcdNode] {
        &self.nodes
    }

    /// The member that is the leader now, if a running one says so.
    pub fn leader(&self) -> Option<&EtcdNode> {
        self.nodes
            .iter()
            .find(|n| n.process.is_running() && n.is_leader())
    }

    /// A running member that is not the leader.
    pub fn follower(&self) -> Option<&EtcdNode> {
        let leader = self.leader()?;
        self.nodes
            .iter()
            .find(|n| n.name != leader.name && n.process.is_running())
    }

    /// Waits until every running member is healthy (has a leader).
    ///
    /// Panics after `timeout`.
    pub fn wait_healthy(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let running: Vec<&EtcdNode> = self
                .nodes
                .iter()
                .filter(|n| n.process.is_running())
                .collect();
            if running.iter().all(|n| n.healthy()) && self.leader().is_some() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the etcd cluster never became healthy"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The endpoints the tests of this binary share for a single node:
/// `WORKERID_ETCD_ENDPOINTS`, or a node started once.
pub fn shared_endpoints() -> Vec<String> {
    static SHARED: OnceLock<String> = OnceLock::new();
    split(SHARED.get_or_init(|| {
        crate::from_env_or(URL_ENV, || {
            Box::leak(Box::new(EtcdServer::start())).endpoint()
        })
    }))
}

/// The `https://` endpoint of a TLS member (client certificates not
/// asked for) shared by the tests of this binary, started once.
pub fn shared_tls_endpoint() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| Box::leak(Box::new(EtcdServer::start_with(ClientTls::Server))).endpoint())
        .clone()
}

/// The `https://` endpoint of a TLS member that requires client
/// certificates, shared by the tests of this binary, started once.
pub fn shared_mtls_endpoint() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| Box::leak(Box::new(EtcdServer::start_with(ClientTls::Mutual))).endpoint())
        .clone()
}

/// The `http://` endpoint of a member with authentication enabled (user
/// `root`, password [`crate::PASSWORD`]), shared by the tests of this
/// binary, started once.
pub fn shared_auth_endpoint() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| Box::leak(Box::new(EtcdServer::start_with_auth())).endpoint())
        .clone()
}

/// The endpoints the tests of this binary share for a 3-node cluster:
/// `WORKERID_ETCD_CLUSTER_ENDPOINTS`, or a cluster started once.
pub fn shared_cluster_endpoints() -> Vec<String> {
    static SHARED: OnceLock<String> = OnceLock::new();
    split(SHARED.get_or_init(|| {
        crate::from_env_or(CLUSTER_URL_ENV, || {
            Box::leak(Box::new(EtcdCluster::start()))
                .endpoints()
                .join(",")
        })
    }))
}

fn split(endpoints: &str) -> Vec<String> {
    endpoints.split(',').map(str::to_string).collect()
}

fn health(host: Ipv4Addr, port: u16) -> bool {
    http(
        host,
        port,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .is_some_and(|answer| answer.contains("\"health\":\"true\""))
}

fn http_post(host: Ipv4Addr, port: u16, path: &str, body: &str) -> Option<String> {
    http(
        host,
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

fn http(host: Ipv4Addr, port: u16, request: &str) -> Option<String> {
    let mut stream =
        TcpStream::connect_timeout(&SocketAddr::from((host, port)), Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// The value of `"name":"value"` or `"name":value` in a flat JSON text.
fn json_field<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{name}\":"))? + name.len() + 3;
    let rest = json[start..].trim_start_matches('"');
    let end = rest.find(['"', ',', '}'])?;
    Some(&rest[..end])
}
