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

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use workerid_testkit::netns::Netns;

use crate::clock::mono_ns;
use crate::history::{ClientHistory, Event};
use crate::nemesis::Fault;
use crate::service_clients::poll_listings;
use crate::targets::{Applied, Target};
use crate::timeline::FaultWindow;
use crate::{FaultsError, Result};

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

/// Watches the store for grants no client knows of: an acquire applied
/// whose answer was lost, and that its sender never found again, holds a
/// worker ID for a whole ttl with no one using it.
#[derive(Debug)]
pub struct GrantWatcher {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<BTreeMap<(u32, u64), (u64, u64)>>,
}

/// A live lease seen in the store whose grant no client received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Orphan {
    /// Its worker ID.
    pub worker_id: u32,
    /// Its fence.
    pub fence: u64,
    /// The first listing that showed it live (`CLOCK_MONOTONIC` ns).
    pub first_seen: u64,
    /// The last listing that showed it live.
    pub last_seen: u64,
    /// Whether it was live at some point outside the fault during which
    /// it appeared (or outside every fault): its requester, whose link
    /// worked again, could have asked for it and did not get it. One that
    /// appeared and expired within one fault had no one who could learn
    /// of it.
    pub outlived_its_fault: bool,
}

impl GrantWatcher {
    /// Lists `namespace` at `url` (from outside the labs) every 100 ms,
    /// noting every live lease's worker ID and fence, until
    /// [`finish`](Self::finish).
    pub fn start(url: String, namespace: String, max_worker_id: u32) -> GrantWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // (worker ID, fence) -> when first and last seen live.
            let mut seen: BTreeMap<(u32, u64), (u64, u64)> = BTreeMap::new();
            let watched = (url.as_str(), namespace.as_str(), max_worker_id);
            poll_listings("the grant watcher", watched, &stopped, |_, at, listing| {
                for lease in listing.live() {
                    seen.entry((lease.id.get(), lease.fence))
                        .and_modify(|(_, last)| *last = at)
                        .or_insert((at, at));
                }
            });
            seen
        });
        GrantWatcher { stop, thread }
    }

    /// Stops watching; returns every live lease seen that no client's
    /// history has a grant of, judged against the run's fault `windows`;
    /// those first seen at or after `clients_until` (when the clients were
    /// told to finish: a client may end with an acquire unanswered) are
    /// left out.
    pub fn finish(
        self,
        histories: &[ClientHistory],
        windows: &[FaultWindow],
        clients_until: u64,
    ) -> Vec<Orphan> {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().unwrap_or_default();
        let known: BTreeSet<(u32, u64)> = histories
            .iter()
            .flat_map(|h| &h.events)
            .filter_map(|event| match event {
                Event::Grant {
                    worker_id, fence, ..
                }
                | Event::Acquired {
                    worker_id, fence, ..
                } => Some((*worker_id, *fence)),
                _ => None,
            })
            .collect();
        orphans_among(seen, &known, windows, clients_until)
    }
}

/// The leases `seen` live (first and last seen) whose grant is not among
/// the `known` ones, judged against the fault `windows`; those first seen
/// at or after `clients_until` left out.
fn orphans_among(
    seen: BTreeMap<(u32, u64), (u64, u64)>,
    known: &BTreeSet<(u32, u64)>,
    windows: &[FaultWindow],
    clients_until: u64,
) -> Vec<Orphan> {
    seen.into_iter()
        .filter(|(grant, (first, _))| !known.contains(grant) && *first < clients_until)
        .map(|((worker_id, fence), (first_seen, last_seen))| {
            let within_one_fault = windows
                .iter()
                .any(|w| w.began <= first_seen && last_seen < w.ended);
            tracing::warn!(
                "orphan grant: worker ID {worker_id}, fence {fence}, live from {first_seen} \
                 to {last_seen}{}",
                if within_one_fault {
                    " (within one fault)"
                } else {
                    " (outlived its fault)"
                }
            );
            Orphan {
                worker_id,
                fence,
                first_seen,
                last_seen,
                outlived_its_fault: !within_one_fault,
            }
        })
        .collect()
}

/// The orphans as the run's summary gives them.
pub fn summarize_orphans(orphans: &[Orphan]) -> String {
    let outlived: Vec<(u32, u64)> = orphans
        .iter()
        .filter(|o| o.outlived_its_fault)
        .map(|o| (o.worker_id, o.fence))
        .collect();
    format!(
        "orphan grants: {} ({} appeared and expired within the fault that lost their answer; \
         outlived it (worker ID, fence): {outlived:?})",
        orphans.len(),
        orphans.len() - outlived.len()
    )
}

/// How long one client took to issue again after a heal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The client.
    pub client: String,
    /// The heal.
    pub heal: Heal,
    /// From the heal to the first ID issued after it; `None` when the client
    /// issued none (it ended first, or never recovered).
    pub after: Option<Duration>,
    /// When that ID's lease was joined after the heal: from the heal to its
    /// acquire's answer, and to the end of the join (which waits for the
    /// client's clock to pass the worker ID's watermark).
    pub rejoined: Option<Rejoin>,
}

/// How a client that lost its lease came back after a heal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejoin {
    /// From the heal to the acquire's answer.
    pub acquired: Duration,
    /// From the heal to the end of the join.
    pub joined: Duration,
    /// The joins that failed between the heal and this one, with their
    /// errors.
    pub failed_joins: Vec<String>,
}

/// When the lease that issued `first` was joined after `heal`: its
/// acquire's answer and the join's end, from the heal.
fn rejoin_of(history: &ClientHistory, lease_of_first: u32, heal: u64) -> Option<Rejoin> {
    let (worker, fence, sent, granted) = history.events.iter().find_map(|event| match event {
        Event::Grant {
            lease,
            worker_id,
            fence,
            sent,
            granted,
            ..
        } if *lease == lease_of_first => Some((*worker_id, *fence, *sent, *granted)),
        _ => None,
    })?;
    if sent < heal {
        return None;
    }
    let acquired = history.events.iter().find_map(|event| match event {
        Event::Acquired {
            worker_id,
            fence: f,
            at,
        } if *worker_id == worker && *f == fence => Some(*at),
        _ => None,
    })?;
    let failed_joins = history
        .events
        .iter()
        .filter_map(|event| match event {
            Event::JoinFailed { at, error } if (heal..sent).contains(at) => Some(error.clone()),
            _ => None,
        })
        .collect();
    Some(Rejoin {
        acquired: Duration::from_nanos(acquired.saturating_sub(heal)),
        joined: Duration::from_nanos(granted.saturating_sub(heal)),
        failed_joins,
    })
}

/// For every heal, every client of the healed lab that was running then and
/// ran for at least `horizon` more: how long until it issued an ID again.
/// `lab_of` names each client's lab; clients that the nemesis stopped,
/// killed or that ended within the horizon are not judged (their silence is
/// the nemesis's, not the network's).
pub fn liveness(
    histories: &[ClientHistory],
    heals: &[Heal],
    lab_of: impl Fn(&str) -> Option<usize>,
    horizon: Duration,
) -> Vec<Recovery> {
    let horizon = u64::try_from(horizon.as_nanos()).unwrap_or(u64::MAX);
    let mut out = Vec::new();
    for heal in heals {
        for history in histories {
            if lab_of(&history.client) != Some(heal.lab) {
                continue;
            }
            let (Some(start), Some(end)) = (first_instant(history), last_instant(history)) else {
                continue;
            };
            if start > heal.at || end < heal.at + horizon {
                continue;
            }
            let first = history.events.iter().find_map(|event| match event {
                Event::Ids { t0, lease, .. } if *t0 >= heal.at => Some((*t0, *lease)),
                _ => None,
            });
            out.push(Recovery {
                client: history.client.clone(),
                heal: *heal,
                after: first.map(|(t0, _)| Duration::from_nanos(t0 - heal.at)),
                rejoined: first.and_then(|(_, lease)| rejoin_of(history, lease, heal.at)),
            });
        }
    }
    out
}

fn first_instant(history: &ClientHistory) -> Option<u64> {
    history.events.iter().map(instant).next()
}

fn last_instant(history: &ClientHistory) -> Option<u64> {
    history.events.iter().map(instant).next_back()
}

/// When an event happened (an ID batch: when its last ID was issued).
fn instant(event: &Event) -> u64 {
    match event {
        Event::Start { at, .. }
        | Event::Lost { at, .. }
        | Event::Stopping { at, .. }
        | Event::Stopped { at, .. }
        | Event::JoinFailed { at, .. }
        | Event::Clock { at, .. }
        | Event::Crash { at, .. }
        | Event::Acquired { at, .. } => *at,
        Event::Grant { granted, .. } => *granted,
        Event::Ids { t1, .. } => *t1,
    }
}

/// The recoveries as a distribution (count, median, p90, worst), overall
/// and per fault, and the clients that never issued again.
pub fn summarize(recoveries: &[Recovery]) -> String {
    let mut lines = vec![distribution("liveness after heals", recoveries)];
    let faults: BTreeSet<Fault> = recoveries.iter().map(|r| r.heal.fault).collect();
    for fault in faults {
        let of: Vec<Recovery> = recoveries
            .iter()
            .filter(|r| r.heal.fault == fault)
            .cloned()
            .collect();
        if !of.is_empty() {
            lines.push(distribution(&format!("  after {fault:?}"), &of));
        }
    }
    let worst = recoveries
        .iter()
        .filter_map(|r| r.after.map(|after| (after, r)))
        .max_by_key(|(after, _)| *after);
    if let Some((after, r)) = worst {
        let how = match &r.rejoined {
            Some(Rejoin {
                acquired,
                joined,
                failed_joins,
            }) => {
                let mut failed: BTreeMap<&str, usize> = BTreeMap::new();
                for error in failed_joins {
                    *failed.entry(error.as_str()).or_default() += 1;
                }
                let failed: Vec<String> = failed
                    .iter()
                    .map(|(error, n)| format!("{error:?} x{n}"))
                    .collect();
                format!(
                    "its lease lost, acquired again {:.2} s after the heal, joined {:.2} s \
                     after it (the join waits for the clock to pass the worker ID's \
                     watermark); joins failed after the heal: [{}]",
                    acquired.as_secs_f64(),
                    joined.as_secs_f64(),
                    failed.join(", ")
                )
            }
            None => "on the lease it held through the fault".to_string(),
        };
        lines.push(format!(
            "  the worst: {} after {:?}, issued {:.2} s after the heal, {how}",
            r.client,
            r.heal.fault,
            after.as_secs_f64()
        ));
    }
    lines.join("\n")
}

fn distribution(what: &str, recoveries: &[Recovery]) -> String {
    let mut times: Vec<Duration> = recoveries.iter().filter_map(|r| r.after).collect();
    times.sort_unstable();
    let stuck: Vec<String> = recoveries
        .iter()
        .filter(|r| r.after.is_none())
        .map(|r| format!("{} after the heal at {}", r.client, r.heal.at))
        .collect();
    if times.is_empty() && stuck.is_empty() {
        return format!("{what}: nothing to judge");
    }
    let at = |q: f64| {
        times
            .get(((times.len() as f64 - 1.0) * q).round() as usize)
            .map_or("-".to_string(), |d| format!("{:.2} s", d.as_secs_f64()))
    };
    format!(
        "{what}: {} recoveries, median {}, p90 {}, worst {}; never issued again: {}",
        times.len(),
        at(0.5),
        at(0.9),
        at(1.0),
        if stuck.is_empty() {
            "none".to_string()
        } else {
            stuck.join(", ")
        }
    )
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

#[cfg(test)]
mod orphan_tests {
    use super::*;

    fn window(began: u64, ended: u64) -> FaultWindow {
        FaultWindow {
            kind: "DropReplies".into(),
            began,
            ended,
        }
    }

    #[test]
    fn an_orphan_is_judged_by_the_fault_it_appeared_in() {
        let seen = BTreeMap::from([
            ((0, 1), (100, 150)), // received by a client
            ((1, 1), (110, 190)), // appeared and expired within the fault
            ((2, 1), (120, 210)), // still live after the heal at 200
            ((3, 1), (300, 320)), // outside every fault
            ((4, 1), (900, 950)), // after the clients were told to finish
        ]);
        let known = BTreeSet::from([(0, 1)]);
        let orphans = orphans_among(seen, &known, &[window(100, 200)], 900);
        let judged: Vec<(u32, bool)> = orphans
            .iter()
            .map(|o| (o.worker_id, o.outlived_its_fault))
            .collect();
        assert_eq!(judged, vec![(1, false), (2, true), (3, true)]);
        assert!(summarize_orphans(&orphans)
            .contains("outlived it (worker ID, fence): [(2, 1), (3, 1)]"));
    }
}
