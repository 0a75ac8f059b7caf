//! etcd: a single node and a 3-node cluster, each node on its own free client
//! and peer ports, with its data directory in the node's temporary directory.
//!
//! Heartbeat 50 ms and election timeout 500 ms (instead of 100 ms / 1 s), so
//! that a killed leader is replaced within about a second.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{free_port, require_program, ServerProcess, ServerSpec};

/// Points the tests at an existing etcd (comma-separated client URLs).
pub const URL_ENV: &str = "WORKERID_ETCD_ENDPOINTS";
/// Points the tests at an existing 3-node etcd cluster (comma-separated client URLs).
pub const CLUSTER_URL_ENV: &str = "WORKERID_ETCD_CLUSTER_ENDPOINTS";

/// One etcd member.
#[derive(Debug)]
pub struct EtcdNode {
    process: ServerProcess,
    name: String,
    client_port: u16,
}

impl EtcdNode {
    /// `http://127.0.0.1:<client port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
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
        health(self.client_port)
    }

    /// Whether this member is the leader, per its `/v3/maintenance/status`.
    pub fn is_leader(&self) -> bool {
        let answer = http_post(self.client_port, "/v3/maintenance/status", "{}");
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
}

fn launch(member: &Member, initial_cluster: &str, token: &str, alone: bool) -> EtcdNode {
    let program = require_program("etcd", "etcd-server");
    let client = format!("http://127.0.0.1:{}", member.client_port);
    let peer = format!("http://127.0.0.1:{}", member.peer_port);
    let port = member.client_port;
    let process = ServerProcess::launch(&format!("etcd-{}", member.name), |dir: &Path| {
        let spec = ServerSpec::new(program).arg_pairs(&[
            ("--name", member.name.clone()),
            ("--data-dir", dir.join("data").display().to_string()),
            ("--listen-client-urls", client.clone()),
            ("--advertise-client-urls", client.clone()),
            ("--listen-peer-urls", peer.clone()),
            ("--initial-advertise-peer-urls", peer.clone()),
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
            spec.ready(move || health(port))
        } else {
            spec.ready(move || TcpStream::connect(("127.0.0.1", port)).is_ok())
        }
        .ready_timeout(Duration::from_secs(60))
    });
    EtcdNode {
        process,
        name: member.name.clone(),
        client_port: member.client_port,
    }
}

fn members(n: usize) -> Vec<Member> {
    (0..n)
        .map(|i| Member {
            name: format!("n{i}"),
            client_port: free_port(),
            peer_port: free_port(),
        })
        .collect()
}

fn initial_cluster(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
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
        let members = members(1);
        let node = launch(
            &members[0],
            &initial_cluster(&members),
            &cluster_token(),
            true,
        );
        EtcdServer { node }
    }

    /// The client endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.node.endpoint()
    }

    /// The process, to stop, kill, restart or pause it.
    pub fn process(&self) -> &ServerProcess {
        self.node.process()
    }
}

/// A 3-member etcd cluster on loopback.
#[derive(Debug)]
pub struct EtcdCluster {
    nodes: Vec<EtcdNode>,
}

impl EtcdCluster {
    /// Starts three members and waits until every one is healthy.
    pub fn start() -> EtcdCluster {
        let members = members(3);
        let cluster = initial_cluster(&members);
        let token = cluster_token();
        let nodes = members
            .iter()
            .map(|m| launch(m, &cluster, &token, false))
            .collect();
        let cluster = EtcdCluster { nodes };
        cluster.wait_healthy(Duration::from_secs(60));
        cluster
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

fn health(port: u16) -> bool {
    http(
        port,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .is_some_and(|answer| answer.contains("\"health\":\"true\""))
}

fn http_post(port: u16, path: &str, body: &str) -> Option<String> {
    http(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

fn http(port: u16, request: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
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
