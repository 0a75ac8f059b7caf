//! A network-fault lab: clients in a network namespace of their own, the
//! servers where the testkit starts them (127.0.0.1 of the root namespace),
//! real TCP between the two, and packets dropped on the way at will.
//!
//! A [`Netns`] is a namespace linked to the root namespace by a veth pair
//! (`10.213.x.1/30` on the host end, `10.213.x.2/30` inside). The servers
//! keep listening on loopback; [`Netns::forward`] starts a relay on the host
//! end of the link that forwards every connection to a server, so a client
//! inside the namespace reaches the server through the link. Faults are
//! iptables rules in the namespace's own filter table, matching the link's
//! interface and the relays' connections only: the machine's firewall and
//! its loopback traffic are never touched, any number of labs run side by
//! side, and a server inside the namespace stays reachable from the root
//! namespace while its store is cut off (what an ID service's clients see
//! when the service loses its store).
//!
//! Packets are dropped, never connections closed or bytes altered by the
//! relay, so the client's kernel behaves as on a broken network: it
//! retransmits with exponential backoff, a connection outlives a partition
//! that heals, an answer lost after the server applied the request stays
//! lost, and a connection the other end forgot (half-open) is found out only
//! by the next write. A proxy that closes connections would test none of
//! that. The relay adds the two faults that dropping packets cannot make: a
//! server that accepts but does not answer ([`Netns::stall`]) and one that
//! forgot its connections ([`Netns::reset_connections`]).
//!
//! The packets the namespace sends are dropped in its OUTPUT chain, so the
//! client's kernel sees a local drop: the application gets no error, and TCP
//! tries again on its timers, with backoff, as for a packet lost on the way.
//!
//! Everything here needs root (`ip netns`, veth pairs, iptables) and the
//! Debian packages `iproute2` and `iptables` (`bash scripts/setup.sh`
//! installs them); a lab that cannot be set up is a panic, never a skip.
//!
//! ```no_run
//! use std::sync::Arc;
//! use workerid_testkit::netns::Netns;
//! let lab = Arc::new(Netns::new());
//! let redis = workerid_testkit::redis::RedisServer::start(Default::default());
//! let through = lab.forward(([127, 0, 0, 1], redis.port()).into());
//! let url = format!("redis://{through}/"); // for clients inside the lab
//! // A thread of one's own, or every thread of a runtime (tokio's
//! // `Builder::on_thread_start`), enters the namespace:
//! let inside = Arc::clone(&lab);
//! std::thread::spawn(move || {
//!     inside.enter_current_thread();
//!     let _socket = std::net::TcpStream::connect(through); // inside the lab
//! });
//! lab.cut(); // a two-way partition; open connections stay open
//! lab.heal();
//! ```

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use crate::relay::Relay;

mod host;
use host::{free_subnet, lock, remove, remove_stale, tool};

/// The chain in the namespace's filter table that holds the fault's rules,
/// jumped to from INPUT and OUTPUT.
const CHAIN: &str = "WORKERID-FAULTS";
/// Where `ip netns` keeps a namespace's handle (a bind mount of its nsfs file).
const NETNS_DIR: &str = "/var/run/netns";
/// Serializes the choice of subnets between processes (`flock`).
const LOCK_FILE: &str = "/run/workerid-testkit-netns.lock";
/// How many /30 subnets 10.213.0.0/16 holds.
const SUBNETS: u32 = 1 << 14;

/// A network namespace linked to the root namespace, with relays to servers
/// and faults on the link. Dropping it stops its relays (closing the
/// connections through them) and removes the veth pair and the namespace,
/// with its iptables rules.
///
/// The link joins the namespace of the thread that called
/// [`new`](Self::new) (the root namespace, normally) to the lab's. The
/// relays and the clean-up run there, whichever thread calls
/// [`forward`](Self::forward) or drops the lab.
///
/// It is `Send + Sync`: share it in an `Arc` with the threads that
/// [enter](Self::enter_current_thread) it.
#[derive(Debug)]
pub struct Netns {
    name: String,
    host_interface: String,
    namespace_interface: String,
    host_address: Ipv4Addr,
    namespace_address: Ipv4Addr,
    ip: PathBuf,
    iptables: PathBuf,
    iptables_restore: PathBuf,
    /// The namespace, opened once so that entering it looks up no path.
    handle: OwnedFd,
    /// The namespace of the link's host end.
    home: OwnedFd,
    relay: Arc<Relay>,
}

impl Netns {
    /// Creates a namespace named `workerid-<pid>-<n>` (unique per process
    /// and call), a veth pair `wh<pid>n<n>` (the calling thread's namespace,
    /// [`host_address`](Self::host_address)) – `wn<pid>n<n>` (inside,
    /// [`namespace_address`](Self::namespace_address)) on a /30 of
    /// 10.213.0.0/16 that no other interface of the root namespace uses,
    /// brings both ends and the namespace's `lo` up, and installs the
    /// (empty) fault chain. Namespaces left behind by dead processes are
    /// removed first.
    ///
    /// # Panics
    /// When not run as root, when `ip`, `iptables` or `iptables-restore` is
    /// missing (naming it and its Debian package), when 10.213.0.0/16 is
    /// full, or when a step of the setup fails (with the tool's output).
    pub fn new() -> Netns {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            panic!(
                "the network-fault lab (workerid_testkit::netns) needs root: it creates network \
                 namespaces, veth pairs and iptables rules. Run the tests as root."
            );
        }
        let ip = tool("ip", "iproute2");
        let iptables = tool("iptables", "iptables");
        let iptables_restore = tool("iptables-restore", "iptables");
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let (pid, n) = (std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let home: OwnedFd = File::open("/proc/thread-self/ns/net")
            .expect("open the calling thread's network namespace")
            .into();
        let name = format!("workerid-{pid}-{n}");
        let host_interface = format!("wh{pid}n{n}");
        let namespace_interface = format!("wn{pid}n{n}");
        assert!(
            host_interface.len() <= 15,
            "interface name {host_interface} is longer than Linux allows (15 bytes)"
        );

        let lock = lock();
        static STALE: Once = Once::new();
        STALE.call_once(|| remove_stale(&ip));
        if Path::new(NETNS_DIR).join(&name).exists() {
            // Left by a dead process that had this pid: names are unique
            // within the process.
            remove(&ip, &name, &host_interface);
        }
        let subnet = free_subnet(&ip);
        let base = u32::from(Ipv4Addr::new(10, 213, 0, 0)) + subnet * 4;
        let (host_address, namespace_address) =
            (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
        crate::run(
            Command::new(&ip).args(["netns", "add", &name]),
            "ip netns add",
        );
        let handle: OwnedFd = File::open(Path::new(NETNS_DIR).join(&name))
            .unwrap_or_else(|e| panic!("cannot open network namespace {name}: {e}"))
            .into();
        // From here on, Drop removes whatever the setup made.
        let lab = Netns {
            name,
            host_interface,
            namespace_interface,
            host_address,
            namespace_address,
            ip,
            iptables,
            iptables_restore,
            handle,
            home,
            relay: Arc::new(Relay::default()),
        };
        let (host, inside) = (&lab.host_interface, &lab.namespace_interface);
        let netns = lab.name.as_str();
        lab.ip(&[
            "link", "add", host, "type", "veth", "peer", "name", inside, "netns", netns,
        ]);
        lab.ip(&["addr", "add", &format!("{host_address}/30"), "dev", host]);
        lab.ip(&["link", "set", host, "up"]);
        // The host end's address is taken: other processes may choose now.
        drop(lock);
        let inside_address = format!("{namespace_address}/30");
        lab.ip(&["-n", netns, "addr", "add", &inside_address, "dev", inside]);
        lab.ip(&["-n", netns, "link", "set", inside, "up"]);
        lab.ip(&["-n", netns, "link", "set", "lo", "up"]);
        lab.restore(&format!(
            "*filter\n:{CHAIN} - [0:0]\n-A INPUT -j {CHAIN}\n-A OUTPUT -j {CHAIN}\nCOMMIT\n"
        ));
        lab
    }

    /// The namespace's name, as `ip netns list` shows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of the veth pair's end in the root namespace.
    pub fn host_interface(&self) -> &str {
        &self.host_interface
    }

    /// The address of the link's end in the root namespace (`10.213.x.1`),
    /// where the relays listen.
    pub fn host_address(&self) -> Ipv4Addr {
        self.host_address
    }

    /// The address of the link's end inside the namespace (`10.213.x.2`),
    /// the source address of the clients' connections.
    pub fn namespace_address(&self) -> Ipv4Addr {
        self.namespace_address
    }

    /// Starts a relay in the root namespace, on an OS-picked port of
    /// [`host_address`](Self::host_address), that forwards every connection
    /// it accepts to `target` (a server on 127.0.0.1, say) and copies bytes
    /// both ways unchanged. Returns its address: clients inside the
    /// namespace connect there. Any number of relays may run; they stop,
    /// closing their connections, when the `Netns` is dropped.
    ///
    /// A client whose connection to `target` fails is disconnected. A close
    /// on either side is passed on as a FIN.
    ///
    /// # Panics
    /// When the port cannot be bound or the relay's thread not started.
    pub fn forward(&self, target: SocketAddr) -> SocketAddr {
        self.at_home(|| self.relay.forward(self.host_address, target))
    }

    /// Routes every address the namespace has no route of its own for
    /// through the link's host end: a program inside then reaches every
    /// address of the root namespace (another namespace's relays), not only
    /// its end of the link.
    ///
    /// # Panics
    /// When `ip route` fails.
    pub fn route_through_host(&self) {
        let via = self.host_address.to_string();
        self.ip(&["-n", &self.name, "route", "add", "default", "via", &via]);
    }

    /// Drops every TCP packet to or from any of `addresses` (and no other),
    /// both ways: the namespace cut from those servers or relays alone.
    /// Replaces the fault in force; connections stay open.
    ///
    /// # Panics
    /// When iptables fails.
    pub fn cut_from(&self, addresses: &[SocketAddr]) {
        let rules: Vec<String> = addresses
            .iter()
            .flat_map(|a| {
                [
                    format!("-p tcp -d {} --dport {} -j DROP", a.ip(), a.port()),
                    format!("-p tcp -s {} --sport {} -j DROP", a.ip(), a.port()),
                ]
            })
            .collect();
        self.set_rules(&rules);
    }

    /// A two-way partition: every packet on the link is dropped, in both
    /// directions. Replaces the fault in force; connections stay open.
    ///
    /// # Panics
    /// When iptables fails.
    pub fn cut(&self) {
        self.set_rules(&[self.drop_entering(""), self.drop_leaving("")]);
    }

    /// Drops the packets from the root namespace to the namespace: the
    /// clients' requests still reach the servers and are applied, the
    /// answers (and the acknowledgements of the requests) are lost.
    /// Replaces the fault in force.
    ///
    /// # Panics
    /// When iptables fails.
    pub fn drop_replies(&self) {
        self.set_rules(&[self.drop_entering("")]);
    }

    /// Drops the packets from the namespace to the root namespace: the
    /// clients' requests never reach the servers. Replaces the fault in
    /// force.
    ///
    /// # Panics
    /// When iptables fails.
    pub fn drop_requests(&self) {
        self.set_rules(&[self.drop_leaving("")]);
    }

    /// Drops `percent` % of the packets on the link, at random, in each
    /// direction on its own (`-m statistic --mode random`). `lose(0)` heals,
    /// `lose(100)` cuts. Replaces the fault in force.
    ///
    /// # Panics
    /// When `percent` is over 100, or when iptables fails.
    pub fn lose(&self, percent: u32) {
        assert!(
            percent <= 100,
            "lose({percent}): a percentage is at most 100"
        );
        match percent {
            0 => self.heal(),
            100 => self.cut(),
            _ => {
                let statistic = format!(
                    "-m statistic --mode random --probability {:.2} ",
                    f64::from(percent) / 100.0
                );
                self.set_rules(&[
                    self.drop_entering(&statistic),
                    self.drop_leaving(&statistic),
                ]);
            }
        }
    }

    /// Removes the fault in force: every packet passes again, and the
    /// packets TCP retransmits reach the other end.
    ///
    /// # Panics
    /// When iptables fails.
    pub fn heal(&self) {
        self.set_rules(&[]);
    }

    /// How many packets the fault in force has dropped so far (the rules'
    /// counters; each fault starts from zero).
    ///
    /// # Panics
    /// When iptables fails or its listing cannot be read.
    pub fn dropped_packets(&self) -> u64 {
        let out = self
            .command(&self.iptables)
            .args(["-L", CHAIN, "-v", "-n", "-x"])
            .output()
            .expect("run iptables -L");
        assert!(
            out.status.success(),
            "iptables -L {CHAIN} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Two header lines, then one line per rule, its packets first.
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(2)
            .filter_map(|line| line.split_whitespace().next())
            .map(|packets| {
                packets
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("unexpected iptables listing: {packets}"))
            })
            .sum()
    }

    /// While `true`, the relays move no bytes: connections are still
    /// accepted (the kernel completes the handshake) but not forwarded, and
    /// the bytes of open connections are held, in the relay and then in the
    /// sockets' buffers (TCP flow control), not dropped. `stall(false)`
    /// forwards the connections accepted meanwhile and lets everything held
    /// through, in order. Works with and independently of the iptables
    /// faults.
    pub fn stall(&self, stalled: bool) {
        self.relay.stall(stalled);
    }

    /// Every byte through the relays from now on arrives `delay` late,
    /// each way (zero: no delay): a slow link, on which a request and its
    /// answer take twice `delay` more. Bytes already on their way keep the
    /// delay they were read with, and none overtakes another.
    pub fn delay(&self, delay: Duration) {
        self.relay.delay(delay);
    }

    /// Ends every connection through the relays: the servers see them
    /// closed (FIN), and the relays abort their side towards the clients
    /// (RST, `SO_LINGER` 0) and forget them. Returns once the relays'
    /// sockets are closed, so the RSTs have been sent.
    ///
    /// Alone, it is a server-side reset: the client's next read or write
    /// fails with `ECONNRESET`. While [`cut`](Self::cut) is in force, the
    /// RSTs are dropped and the client never learns of it: `cut();
    /// reset_connections(); heal();` leaves the client a half-open
    /// connection, one the other end no longer knows. Its reads wait for
    /// ever; its next write reaches the host end, which answers with an RST,
    /// and the client's next read or write fails with `ECONNRESET`.
    ///
    /// # Panics
    /// When a relay thread does not let go of its connection within 5 s.
    pub fn reset_connections(&self) {
        self.relay.reset_connections(&self.name);
    }

    /// A command that runs `program` inside the namespace (`ip netns exec
    /// <name> <program>`, which looks `program` up on the PATH); add its
    /// arguments and spawn it. `ip netns exec`
    /// replaces itself with the program (it does not fork), so the child's
    /// PID is the program's own and signals sent to the child (SIGSTOP,
    /// SIGKILL) reach the program. The program also gets a mount namespace
    /// of its own, with the namespace's `/sys`.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let (ip, args) = self.exec_prefix();
        let mut command = Command::new(ip);
        command.args(args).arg(program);
        command
    }

    /// What [`command`](Self::command) puts before the program: the `ip`
    /// program and its arguments (`netns exec <name>`), for a launcher that
    /// builds its command itself.
    pub fn exec_prefix(&self) -> (&Path, [&str; 3]) {
        (&self.ip, ["netns", "exec", &self.name])
    }

    /// Moves the calling thread into the namespace (`setns(2)` with
    /// `CLONE_NEWNET`, on a descriptor opened once by [`new`](Self::new), so
    /// it looks up no path): network namespaces are per thread on Linux, so
    /// the sockets the thread opens from now on are inside it, while the
    /// process's other threads stay where they are. A socket keeps the
    /// namespace it was created in, whichever thread uses it later. Meant
    /// for threads of one's own and for a runtime's thread-start hook
    /// (tokio's `Builder::on_thread_start`, which also covers its blocking
    /// pool, where name lookups run). A thread stays in the namespace
    /// after the `Netns` is dropped, unlinked from everything.
    ///
    /// # Panics
    /// When `setns` fails.
    pub fn enter_current_thread(&self) {
        // SAFETY: setns only reads the descriptor, which `self` keeps open.
        let entered = unsafe { libc::setns(self.handle.as_raw_fd(), libc::CLONE_NEWNET) };
        if entered != 0 {
            panic!(
                "cannot enter network namespace {}: {}",
                self.name,
                io::Error::last_os_error()
            );
        }
    }

    /// Runs `work` on a thread of its own in the namespace of the link's host
    /// end (threads inherit their creator's namespace, and the caller may be
    /// inside the lab).
    fn at_home<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        let home = self.home.as_raw_fd();
        std::thread::scope(|scope| {
            let thread = scope.spawn(move || {
                // SAFETY: setns only reads the descriptor, which `self` keeps open.
                if unsafe { libc::setns(home, libc::CLONE_NEWNET) } != 0 {
                    panic!(
                        "cannot go back to the namespace of the link's host end: {}",
                        io::Error::last_os_error()
                    );
                }
                work()
            });
            thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    fn ip(&self, args: &[&str]) {
        crate::run(
            Command::new(&self.ip).args(args),
            &format!("ip {}", args.join(" ")),
        );
    }

    /// The rule dropping (some of) the packets that enter the namespace:
    /// those of the relays' connections, or every packet while there is no
    /// relay.
    fn drop_entering(&self, matches: &str) -> String {
        let relays = self.relay_match("--sports");
        format!("-i {} {relays}{matches}-j DROP", self.namespace_interface)
    }

    /// The rule dropping (some of) the packets that leave the namespace.
    fn drop_leaving(&self, matches: &str) -> String {
        let relays = self.relay_match("--dports");
        format!("-o {} {relays}{matches}-j DROP", self.namespace_interface)
    }

    /// Matches the packets of the relays' connections (`--sports` of the
    /// relays, entering; `--dports`, leaving); empty without relays. Other
    /// traffic on the link (a client in the root namespace reaching a
    /// server inside) is never dropped.
    fn relay_match(&self, direction: &str) -> String {
        let ports: Vec<String> = self.relay.ports().iter().map(u16::to_string).collect();
        if ports.is_empty() {
            return String::new();
        }
        // multiport takes at most 15 ports per rule; a lab has a few.
        assert!(ports.len() <= 15, "at most 15 relays per lab");
        format!("-p tcp -m multiport {direction} {} ", ports.join(","))
    }

    /// Replaces the fault chain's rules with `rules`, atomically (one
    /// iptables-restore transaction), so no packet slips through between
    /// two faults.
    fn set_rules(&self, rules: &[String]) {
        let mut input = format!("*filter\n-F {CHAIN}\n");
        for rule in rules {
            input.push_str(&format!("-A {CHAIN} {rule}\n"));
        }
        input.push_str("COMMIT\n");
        self.restore(&input);
    }

    /// Feeds `input` to `iptables-restore --noflush` inside the namespace.
    fn restore(&self, input: &str) {
        let mut child = self
            .command(&self.iptables_restore)
            .arg("--noflush")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run iptables-restore");
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .expect("write iptables-restore's input");
        }
        let out = child.wait_with_output().expect("wait for iptables-restore");
        assert!(
            out.status.success(),
            "iptables-restore in {} failed: {}\ninput:\n{input}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Default for Netns {
    /// [`Netns::new`].
    fn default() -> Self {
        Netns::new()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace frees it only once nothing uses it (a
        // thread inside, a socket, our handle) and the kernel gets to it;
        // deleting the veth pair takes it off the link at once.
        let (home, relay) = (self.home.as_raw_fd(), &self.relay);
        let (ip, name, host) = (&self.ip, &self.name, &self.host_interface);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // Best effort, as nothing may panic here: should setns fail,
                // the clean-up runs in the dropping thread's namespace.
                // SAFETY: setns only reads the descriptor, which `self` keeps open.
                unsafe { libc::setns(home, libc::CLONE_NEWNET) };
                relay.stop();
                remove(ip, name, host);
            });
        });
    }
}
