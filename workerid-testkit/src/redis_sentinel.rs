//! Redis with a replica and three Sentinels: a master that fails over.
//!
//! Both servers run with `appendonly yes` and `appendfsync always`. The
//! Sentinels watch the master under [`MASTER_NAME`], call it down after
//! 1 s without an answer, and promote the replica; a killed master started
//! again is turned into a replica of the new one.

use std::time::{Duration, Instant};

use crate::redis::{ask, ping, RedisServer};
use crate::{free_port, require_program, ServerProcess, ServerSpec};

/// The name under which the Sentinels know the master.
pub const MASTER_NAME: &str = "workerid";

/// Two Redis servers (one master, one replica) and three Sentinels.
#[derive(Debug)]
pub struct RedisSentinelGroup {
    servers: Vec<RedisServer>,
    sentinels: Vec<(u16, ServerProcess)>,
}

impl RedisSentinelGroup {
    /// Starts the master, its replica and three Sentinels, and waits until
    /// every Sentinel knows the replica and the other Sentinels.
    pub fn start() -> RedisSentinelGroup {
        let program = require_program("redis-sentinel", "redis-sentinel");
        let (master, replica) = RedisServer::start_durable_pair();
        let master_port = master.port();
        let sentinels = (0..3)
            .map(|i| {
                let port = free_port();
                let process = ServerProcess::launch(&format!("sentinel-{i}"), |dir| {
                    let config = dir.join("sentinel.conf");
                    let text = format!(
                        "port {port}\nbind 127.0.0.1\ndaemonize no\nprotected-mode no\n\
                         dir {dir}\nlogfile \"\"\n\
                         sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                         sentinel failover-timeout {MASTER_NAME} 4000\n\
                         sentinel parallel-syncs {MASTER_NAME} 1\n",
                        dir = dir.display()
                    );
                    std::fs::write(&config, text).expect("write sentinel.conf");
                    ServerSpec::new(&program)
                        .args([config])
                        .ready(move || ping(port))
                });
                (port, process)
            })
            .collect();
        let group = RedisSentinelGroup {
            servers: vec![master, replica],
            sentinels,
        };
        group.wait_until_replicated(Duration::from_secs(30));
        group.wait_until(
            Duration::from_secs(30),
            "the Sentinels to find each other",
            |g| {
                g.sentinel_ports().iter().all(|&port| {
                    let replicas = ask(
                        port,
                        format!("SENTINEL REPLICAS {MASTER_NAME}\r\n").as_bytes(),
                    );
                    let peers = ask(
                        port,
                        format!("SENTINEL SENTINELS {MASTER_NAME}\r\n").as_bytes(),
                    );
                    replicas.is_some_and(|r| r.starts_with("*1"))
                        && peers.is_some_and(|p| p.starts_with("*2"))
                })
            },
        );
        group
    }

    /// `redis+sentinel://127.0.0.1:<port>,.../workerid`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinel_ports()
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The two Redis servers, in the order they started (the first was the
    /// master at first).
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The Sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|(port, _)| *port).collect()
    }

    /// The server a majority of Sentinels name as the master, if any.
    pub fn master(&self) -> Option<usize> {
        let mut votes = [0usize; 2];
        for port in self.sentinel_ports() {
            let Some(answer) = ask(
                port,
                format!("SENTINEL GET-MASTER-ADDR-BY-NAME {MASTER_NAME}\r\n").as_bytes(),
            ) else {
                continue;
            };
            for (i, server) in self.servers.iter().enumerate() {
                if answer.contains(&format!("\r\n{}\r\n", server.port())) {
                    votes[i] += 1;
                }
            }
        }
        votes.iter().position(|&v| v >= 2)
    }

    /// Waits until a majority of Sentinels name one master (after a
    /// failover they agree within a few seconds); returns it. Panics after
    /// `timeout`.
    pub fn wait_for_master(&self, timeout: Duration) -> usize {
        let mut named = None;
        self.wait_until(timeout, "the Sentinels to agree on a master", |g| {
            named = g.master();
            named.is_some()
        });
        named.expect("a master")
    }

    /// Whether server `i` says it is a master (`ROLE`).
    pub fn is_master(&self, i: usize) -> bool {
        ask(self.servers[i].port(), b"ROLE\r\n").is_some_and(|role| role.contains("master"))
    }

    /// Waits until the Sentinels name a master other than `old` and that
    /// server says it is one; returns it. Panics after `timeout`.
    pub fn wait_for_failover(&self, old: usize, timeout: Duration) -> usize {
        let mut promoted = None;
        self.wait_until(timeout, "a failover", |g| {
            promoted = g.master().filter(|&m| m != old && g.is_master(m));
            promoted.is_some()
        });
        promoted.expect("a new master")
    }

    /// Waits until the Sentinels name a master and the other server is its
    /// replica, in sync (after a failover, and a killed server started
    /// again; the Sentinels may fail over once more meanwhile, from a
    /// master too busy to answer them in time); returns the master.
    pub fn wait_until_replicated(&self, timeout: Duration) -> usize {
        let info = |i: usize| ask(self.servers[i].port(), b"INFO replication\r\n");
        let in_sync = |i: usize| {
            info(i).is_some_and(|info| {
                info.contains("role:slave") && info.contains("master_link_status:up")
            })
        };
        let began = Instant::now();
        loop {
            if let Some(master) = self.master() {
                if in_sync(1 - master) && self.is_master(master) {
                    return master;
                }
            }
            assert!(
                began.elapsed() < timeout,
                "waited {timeout:?} for a master and its replica in sync; the servers say {:?} \
                 and {:?}; the Sentinels name {:?}",
                info(0),
                info(1),
                self.master(),
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_until(&self, timeout: Duration, what: &str, mut done: impl FnMut(&Self) -> bool) {
        let began = Instant::now();
        while !done(self) {
            assert!(began.elapsed() < timeout, "waited {timeout:?} for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
