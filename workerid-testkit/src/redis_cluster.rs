//! A Redis Cluster of three masters with a replica each: a cluster whose
//! masters fail over.
//!
//! Every node runs with `appendonly yes` and `appendfsync always`, and a
//! `cluster-node-timeout` of [`NODE_TIMEOUT`]: a killed master's replica is
//! promoted a few seconds later, and the killed master, started again,
//! rejoins as the replica of the node that took its slots.
//!
//! ```no_run
//! use std::time::Duration;
//! use workerid_testkit::redis_cluster::RedisReplicatedCluster;
//! let cluster = RedisReplicatedCluster::start();
//! let slot = cluster.key_slot("{orders}");
//! let master = cluster.master_of_slot(slot).expect("the nodes agree");
//! cluster.nodes()[master].process().kill();
//! let promoted = cluster.wait_for_failover(master, slot, Duration::from_secs(30));
//! cluster.nodes()[master].process().start();
//! cluster.wait_until_replicated(Duration::from_secs(30));
//! assert_eq!(cluster.replica_of(promoted), Some(master));
//! ```

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::redis::{ask, cluster_ok, join_cluster, RedisConfig, RedisServer};

/// How long a node may not answer before the others count it failed.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// Six nodes: three masters, each with one replica.
#[derive(Debug)]
pub struct RedisReplicatedCluster {
    nodes: Vec<RedisServer>,
}

/// One node's view of the cluster (`CLUSTER NODES`): each master that
/// serves slots, by port, with its slot ranges.
type View = Vec<(u16, Vec<(u16, u16)>)>;

impl RedisReplicatedCluster {
    /// Starts six durable nodes, joins them with `redis-cli --cluster create
    /// --cluster-replicas 1`, and waits until every master has its replica
    /// in sync and every node reports `cluster_state:ok`.
    pub fn start() -> RedisReplicatedCluster {
        let config = RedisConfig {
            persistence: true,
            cluster_node: true,
            cluster_node_timeout: Some(NODE_TIMEOUT),
            ..RedisConfig::default()
        };
        let nodes: Vec<RedisServer> = (0..6).map(|_| RedisServer::start(config)).collect();
        join_cluster(&nodes, false, 1);
        let cluster = RedisReplicatedCluster { nodes };
        cluster.wait_until_replicated(Duration::from_secs(60));
        cluster
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// `redis+cluster://127.0.0.1:<port>,...` with every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The six nodes, in the order they started.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The slot `key` maps to (`CLUSTER KEYSLOT`, asked of a running node).
    pub fn key_slot(&self, key: &str) -> u16 {
        self.running()
            .find_map(|i| {
                let answer = ask(self.nodes[i].port(), &command(&["CLUSTER", "KEYSLOT", key]))?;
                answer.trim().strip_prefix(':')?.parse().ok()
            })
            .unwrap_or_else(|| panic!("no node answers CLUSTER KEYSLOT {key}"))
    }

    /// The node every running node names as the master of `slot`, if they
    /// all answer and agree.
    pub fn master_of_slot(&self, slot: u16) -> Option<usize> {
        let mut named = None;
        for i in self.running() {
            let view = self.view(i)?;
            let port = view
                .iter()
                .find(|(_, ranges)| ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)))
                .map(|(port, _)| *port)?;
            if named.is_some_and(|p| p != port) {
                return None;
            }
            named = Some(port);
        }
        named.and_then(|port| self.index_of(port))
    }

    /// The node that says it is the replica of node `master`, its link up
    /// (`INFO replication`).
    pub fn replica_of(&self, master: usize) -> Option<usize> {
        let port = self.nodes[master].port();
        self.running()
            .find(|&i| self.replicating(i).is_some_and(|(of, up)| up && of == port))
    }

    /// Whether node `i` says it is a master (`ROLE`).
    pub fn is_master(&self, i: usize) -> bool {
        ask(self.nodes[i].port(), b"ROLE\r\n").is_some_and(|role| role.contains("master"))
    }

    /// Moves `slot`, which must hold no key, to the master `to`, as a
    /// resharding does (`CLUSTER SETSLOT` IMPORTING, MIGRATING, then NODE
    /// on both), and waits until every node names `to` as its master: so
    /// that keys of different hash tags live on one master, which a test
    /// then fails over.
    pub fn move_slot(&self, slot: u16, to: usize) {
        let from = self.wait_for_master(slot, Duration::from_secs(30));
        if from == to {
            return;
        }
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let slot_text = slot.to_string();
        let keys = ask(
            self.nodes[from].port(),
            &command(&["CLUSTER", "COUNTKEYSINSLOT", &slot_text]),
        );
        assert_eq!(
            keys.as_deref().map(str::trim),
            Some(":0"),
            "slot {slot} holds keys"
        );
        for (node, state, id) in [
            (to, "IMPORTING", &from_id),
            (from, "MIGRATING", &to_id),
            (to, "NODE", &to_id),
            (from, "NODE", &to_id),
        ] {
            let answer = ask(
                self.nodes[node].port(),
                &command(&["CLUSTER", "SETSLOT", &slot_text, state, id]),
            );
            assert!(
                answer.as_deref().is_some_and(|a| a.starts_with("+OK")),
                "CLUSTER SETSLOT {slot} {state} on node {node}: {answer:?}"
            );
        }
        self.wait_for(Duration::from_secs(30), "the slot to move", |c| {
            (c.master_of_slot(slot) == Some(to) && c.all_ok()).then_some(())
        });
    }

    /// Waits until every running node names one node as the master of
    /// `slot`; returns it. Panics after `timeout`.
    pub fn wait_for_master(&self, slot: u16, timeout: Duration) -> usize {
        self.wait_for(timeout, "the nodes to agree on the slot's master", |c| {
            c.master_of_slot(slot)
        })
    }

    /// Waits until every running node names a node other than `old` as the
    /// master of `slot`, that node says it is a master, and every running
    /// node reports `cluster_state:ok`; returns it. Panics after `timeout`.
    pub fn wait_for_failover(&self, old: usize, slot: u16, timeout: Duration) -> usize {
        self.wait_for(timeout, "a failover", |c| {
            c.master_of_slot(slot)
                .filter(|&m| m != old && c.is_master(m) && c.all_ok())
        })
    }

    /// Waits until all six nodes run, three say they are masters and each
    /// of those has a replica whose link is up and which the master counts
    /// online, every node names those three as the masters that serve
    /// slots, and every node reports `cluster_state:ok` (after a failover
    /// and the killed master started again; a master too busy to answer
    /// in time may have been failed over once more meanwhile). Panics
    /// after `timeout`, with what each node says.
    pub fn wait_until_replicated(&self, timeout: Duration) {
        let began = Instant::now();
        while !self.replicated() {
            assert!(
                began.elapsed() < timeout,
                "waited {timeout:?} for three masters with a replica each in sync; the nodes \
                 say {:#?}",
                self.nodes
                    .iter()
                    .map(|n| (n.port(), ask(n.port(), b"INFO replication\r\n")))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn replicated(&self) -> bool {
        if self.running().count() != self.nodes.len() || !self.all_ok() {
            return false;
        }
        let masters: BTreeSet<u16> = (0..self.nodes.len())
            .filter(|&i| self.is_master(i))
            .map(|i| self.nodes[i].port())
            .collect();
        let in_sync = |port: u16| {
            let replica = (0..self.nodes.len())
                .find(|&i| self.replicating(i).is_some_and(|(of, up)| up && of == port));
            replica.is_some_and(|r| {
                let online = format!("port={},state=online", self.nodes[r].port());
                ask(port, b"INFO replication\r\n").is_some_and(|info| info.contains(&online))
            })
        };
        masters.len() == 3
            && masters.iter().all(|&port| in_sync(port))
            && (0..self.nodes.len()).all(|i| {
                self.view(i).is_some_and(|view| {
                    view.iter().map(|(port, _)| *port).collect::<BTreeSet<_>>() == masters
                })
            })
    }

    /// Whether every running node reports `cluster_state:ok`.
    fn all_ok(&self) -> bool {
        self.running().all(|i| cluster_ok(self.nodes[i].port()))
    }

    /// The nodes whose process runs.
    fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].process().is_running())
    }

    fn index_of(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// Node `i` as a replica: its master's port and whether the link is up.
    fn replicating(&self, i: usize) -> Option<(u16, bool)> {
        let info = ask(self.nodes[i].port(), b"INFO replication\r\n")?;
        if !info.contains("role:slave") {
            return None;
        }
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name))
                .map(|value| value.trim().to_string())
        };
        let port = field("master_port:")?.parse().ok()?;
        Some((port, field("master_link_status:").as_deref() == Some("up")))
    }

    /// Node `i`'s `CLUSTER NODES`: the masters that serve slots, with their
    /// slot ranges (a slot being moved, `[slot->-id]`, is left out).
    fn view(&self, i: usize) -> Option<View> {
        let answer = ask(self.nodes[i].port(), b"CLUSTER NODES\r\n")?;
        let (_, text) = answer.split_once("\r\n")?;
        let mut view = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(address), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
                continue;
            }
            let port: u16 = address
                .split(['@', ','])
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let ranges: Vec<(u16, u16)> = fields
                .iter()
                .skip(8)
                .filter(|range| !range.starts_with('['))
                .filter_map(|range| match range.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => range.parse().ok().map(|s| (s, s)),
                })
                .collect();
            if !ranges.is_empty() {
                view.push((port, ranges));
            }
        }
        Some(view)
    }

    /// Node `i`'s ID (`CLUSTER MYID`).
    fn node_id(&self, i: usize) -> String {
        let answer = ask(self.nodes[i].port(), b"CLUSTER MYID\r\n")
            .unwrap_or_else(|| panic!("node {i} does not answer CLUSTER MYID"));
        answer
            .lines()
            .nth(1)
            .unwrap_or_else(|| panic!("CLUSTER MYID answered {answer:?}"))
            .to_string()
    }

    /// Polls `done` every 50 ms until it gives an answer; panics after
    /// `timeout`.
    fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&Self) -> Option<T>,
    ) -> T {
        let began = Instant::now();
        loop {
            if let Some(answer) = done(self) {
                return answer;
            }
            assert!(began.elapsed() < timeout, "waited {timeout:?} for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A request in Redis's protocol (an array of bulk strings), so that an
/// argument may hold any byte.
fn command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len());
    for arg in args {
        out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    out.into_bytes()
}
