//! Real network faults between clients and the store.
//!
//! Clients run in network namespaces of their own ([`Labs`], two of them, so
//! that one side can be cut while the other still reaches the store), each
//! reaching the store through a relay on a veth link
//! ([`workerid_testkit::netns`]). The faults drop packets on a lab's link
//! with iptables, so the clients' kernels behave as on a broken network
//! (retransmission with backoff, answers lost after the store applied the
//! request, half-open connections), rather than seeing a frozen server.
//!
//! After each fault heals, [`liveness`] measures how long every client of
//! that lab takes to issue IDs again.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use workerid_testkit::netns::Netns;

use crate::clock::mono_ns;
use crate::nemesis::Fault;
use crate::targets::{Applied, Target};

mod liveness;
mod orphans;
use crate::{FaultsError, Result};
pub use liveness::{liveness, summarize, Recovery, Rejoin};
pub use orphans::{summarize_orphans, GrantWatcher, Orphan};

/// How many labs a network run has: clients alternate between them.
pub const LABS: usize = 2;

/// One lab: a namespace, its relays to the store (by the store's port),
/// the URL clients inside use.
#[derive(Debug)]
struct Lab {
    netns: Netns,
    /// (server, the relay to it).
    relays: Vec<(SocketAddr, SocketAddr)>,
    url: String,
}

/// The namespaces a network run's clients live in.
#[derive(Debug)]
pub struct Labs {
    labs: Vec<Lab>,
    /// The shortest a fault lasts (see [`Labs::lasting_at_least`]).
    at_least: Duration,
}

/// When a network fault on a lab ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heal {
    /// Which fault ended.
    pub fault: Fault,
    /// Which lab.
    pub lab: usize,
    /// When (`CLOCK_MONOTONIC` ns).
    pub at: u64,
}

impl Labs {
    /// `count` labs with relays to every server of `target`.
    ///
    /// # Errors
    /// [`FaultsError::Config`] for a store whose clients learn addresses
    /// from the store itself (Redis Cluster: its nodes redirect clients to
    /// the loopback addresses they announce, which a lab cannot reach) or
    /// that has no server (memory, SQLite). An etcd cluster works: the etcd
    /// store talks only to the endpoints it is given (through the relays it
    /// cannot tell the leader by its advertised URL, so it stays on the
    /// first member that answers).
    ///
    /// # Panics
    /// When a lab cannot be set up (not root, no `ip` or `iptables`).
    pub fn new(target: &Target, count: usize) -> Result<Labs> {
        let url = target.url();
        let servers = server_addresses(&url);
        let name = target.name();
        if servers.is_empty() || name == "redis-cluster" {
            return Err(FaultsError::Config(format!(
                "network faults need a store its clients reach at the addresses they \
                 are given; {name} is not one"
            )));
        }
        let labs = (0..count)
            .map(|_| {
                let netns = Netns::new();
                let relays = servers
                    .iter()
                    .map(|&server| (server, netns.forward(server)))
                    .collect();
                let mut lab = Lab {
                    netns,
                    relays,
                    url: String::new(),
                };
                lab.url = lab.translate(&url);
                lab
            })
            .collect();
        Ok(Labs {
            labs,
            at_least: Duration::ZERO,
        })
    }

    /// The lab client number `n` lives in.
    pub fn of_client(n: usize) -> usize {
        n % LABS
    }

    /// The store's URL from inside lab `lab`.
    pub fn url(&self, lab: usize) -> &str {
        &self.labs[lab].url
    }

    /// `url` (the store's, with parameters of its own) as seen from inside
    /// lab `lab`: its loopback addresses replaced by the lab's relays.
    pub fn translate(&self, lab: usize, url: &str) -> String {
        self.labs[lab].translate(url)
    }

    /// The `ip` program and the arguments that run a program inside lab
    /// `lab` (see [`Netns::exec_prefix`]).
    pub fn exec_prefix(&self, lab: usize) -> (&std::path::Path, [&str; 3]) {
        self.labs[lab].netns.exec_prefix()
    }

    /// `program`, to run inside lab `lab`.
    pub fn command(&self, lab: usize, program: &std::path::Path) -> Command {
        self.labs[lab].netns.command(program)
    }

    /// The address of lab `lab` that the root namespace reaches it at (a
    /// server inside listens there).
    pub fn address(&self, lab: usize) -> std::net::Ipv4Addr {
        self.labs[lab].netns.namespace_address()
    }

    /// The same labs, whose faults last at least `at_least` (by default
    /// from half a ttl: a fault shorter than a ttl leaves every lease live).
    pub fn lasting_at_least(mut self, at_least: Duration) -> Labs {
        self.at_least = at_least;
        self
    }

    /// Applies a network fault to a lab picked at random, for a while
    /// scaled by `ttl`, and heals it.
    pub fn apply(&self, fault: Fault, rng: &mut StdRng, ttl: Duration) -> (Applied, Heal) {
        let lab = rng.random_range(0..self.labs.len());
        self.apply_on(lab, fault, rng, ttl)
    }

    /// Cuts every lab from the servers at `servers` (of the store's URL),
    /// both ways, leaving its links to the others, until
    /// [`heal_all`](Self::heal_all).
    pub fn cut_from_servers(&self, servers: &[SocketAddr]) {
        for lab in &self.labs {
            let relays: Vec<SocketAddr> = lab
                .relays
                .iter()
                .filter(|(server, _)| servers.contains(server))
                .map(|(_, relay)| *relay)
                .collect();
            lab.netns.cut_from(&relays);
        }
    }

    /// Heals every lab.
    pub fn heal_all(&self) {
        for lab in &self.labs {
            lab.netns.heal();
        }
    }

    /// Cuts the store from every lab at once, both ways, for 0.5 to 3
    /// `ttl`s, and heals them all: one heal per lab.
    pub fn cut_all(&self, rng: &mut StdRng, ttl: Duration) -> (Applied, Vec<Heal>) {
        let d = self.lasting(rng, ttl, 1, 6);
        for lab in &self.labs {
            lab.netns.cut();
        }
        std::thread::sleep(d);
        for lab in &self.labs {
            lab.netns.heal();
        }
        let at = mono_ns();
        let applied = Applied {
            what: format!("cut the store from every lab, both ways, for {d:?}"),
            killed_at: None,
            ended: at,
        };
        let heals = (0..self.labs.len())
            .map(|lab| Heal {
                fault: Fault::PartitionStore,
                lab,
                at,
            })
            .collect();
        (applied, heals)
    }

    /// Between `low` and `high` half ttls, and at least the labs' shortest
    /// fault.
    fn lasting(&self, rng: &mut StdRng, ttl: Duration, low: u64, high: u64) -> Duration {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rng.random_range(ttl_ms * low / 2..=ttl_ms * high / 2))
            .max(self.at_least)
    }

    /// Applies a network fault to lab `lab` for a while scaled by `ttl`,
    /// and heals it.
    pub fn apply_on(
        &self,
        lab: usize,
        fault: Fault,
        rng: &mut StdRng,
        ttl: Duration,
    ) -> (Applied, Heal) {
        let netns = &self.labs[lab].netns;
        let mut lasting = |low: u64, high: u64| self.lasting(rng, ttl, low, high);
        let what = match fault {
            Fault::PartitionClients => {
                let d = lasting(1, 6);
                netns.cut();
                std::thread::sleep(d);
                format!("cut lab {lab} from the store both ways for {d:?}")
            }
            Fault::DropReplies => {
                let d = lasting(1, 6);
                netns.drop_replies();
                std::thread::sleep(d);
                format!("drop the store's replies to lab {lab} for {d:?}")
            }
            Fault::DropRequests => {
                let d = lasting(1, 6);
                netns.drop_requests();
                std::thread::sleep(d);
                format!("drop lab {lab}'s requests to the store for {d:?}")
            }
            Fault::LossyLink => {
                let d = lasting(2, 6);
                let percent = rng.random_range(5..=30);
                netns.lose(percent);
                std::thread::sleep(d);
                format!("lose {percent} % of lab {lab}'s packets for {d:?}")
            }
            Fault::HalfOpen => {
                let d = lasting(1, 2);
                netns.cut();
                netns.reset_connections();
                std::thread::sleep(d);
                format!(
                    "cut lab {lab}, forget its connections at the store's end, heal after \
                     {d:?}: its connections are half-open"
                )
            }
            Fault::SlowLink => {
                let d = lasting(2, 6);
                // Each way, a sixth of the ttl to five eighths of it.
                let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
                let each_way = Duration::from_millis(rng.random_range(ttl_ms / 6..=ttl_ms * 5 / 8));
                netns.delay(each_way);
                std::thread::sleep(d);
                netns.delay(Duration::ZERO);
                format!("slow lab {lab}'s link by {each_way:?} each way for {d:?}")
            }
            Fault::StallLink => {
                let d = lasting(1, 4);
                netns.stall(true);
                std::thread::sleep(d);
                netns.stall(false);
                format!("stall lab {lab}'s link (connections accepted, nothing moves) for {d:?}")
            }
            other => format!("{other:?} is not a network fault"),
        };
        netns.heal();
        let at = mono_ns();
        let applied = Applied {
            what,
            killed_at: None,
            ended: at,
        };
        (applied, Heal { fault, lab, at })
    }
}

impl Lab {
    fn translate(&self, url: &str) -> String {
        let mut through = url.to_string();
        for (server, relay) in &self.relays {
            through = through.replace(&server.to_string(), &relay.to_string());
        }
        through
    }
}

/// Every `<IPv4 address>:<port>` in `url`, in order, once each.
fn server_addresses(url: &str) -> Vec<SocketAddr> {
    let bytes = url.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            && (i == 0 || !(bytes[i - 1].is_ascii_digit() || bytes[i - 1] == b'.'));
        if !starts {
            i += 1;
            continue;
        }
        let end = url[i..]
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
            .map_or(url.len(), |n| i + n);
        if let Ok(address) = url[i..end].parse::<std::net::SocketAddrV4>() {
            let address = SocketAddr::V4(address);
            if !found.contains(&address) {
                found.push(address);
            }
        }
        i = end.max(i + 1);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_are_found_in_every_url_kind() {
        let at = |s: &str| -> SocketAddr { s.parse().unwrap() };
        assert_eq!(
            server_addresses("redis://127.0.0.1:6390/"),
            [at("127.0.0.1:6390")]
        );
        assert_eq!(
            server_addresses("postgres://u1:p2@127.0.0.1:5433/db?x=127.0.0.1:1"),
            [at("127.0.0.1:5433"), at("127.0.0.1:1")]
        );
        assert_eq!(
            server_addresses("etcd://10.213.0.2:1,10.213.0.6:2,10.213.0.2:1"),
            [at("10.213.0.2:1"), at("10.213.0.6:2")]
        );
        assert!(server_addresses("memory://").is_empty());
        assert!(server_addresses("sqlite:///tmp/a1.2:3/x.db").is_empty());
    }
}
