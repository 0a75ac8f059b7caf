//! The network-fault lab over real TCP: a client thread inside the lab's
//! namespace, a server on 127.0.0.1 of the root namespace, and each fault
//! doing to the packets what it says, while the connections stay open.
//!
//! Needs root, `ip` and `iptables` (`bash scripts/setup.sh`); without them
//! `Netns::new` panics with the reason, so these tests fail, never skip.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use workerid_testkit::netns::Netns;
use workerid_testkit::redis::{RedisConfig, RedisServer};

/// Ample time for a connection that works to answer, even on a busy
/// machine (waited out only when a test fails).
const ANSWER: Duration = Duration::from_secs(2);
/// How long a fault's silence is watched (an answer on a working link takes
/// well under a millisecond here). Short, because the longer a fault lasts,
/// the longer TCP waits after the heal: it retransmits 0.2 s, 0.6 s, 1.4 s,
/// 3 s... after the first send.
const SILENCE: Duration = Duration::from_millis(300);
/// Long enough for TCP to retransmit after a fault heals (its timeouts start
/// at 200 ms and double with each loss).
const RETRANSMITTED: Duration = Duration::from_secs(6);

/// A TCP echo server on 127.0.0.1 that counts the bytes it received and the
/// connections that ended.
struct Echo {
    address: SocketAddr,
    received: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

impl Echo {
    fn start() -> Echo {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let address = listener.local_addr().unwrap();
        let received = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (counted, ended) = (Arc::clone(&received), Arc::clone(&closed));
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (counted, ended) = (Arc::clone(&counted), Arc::clone(&ended));
                thread::spawn(move || {
                    let mut buffer = [0u8; 4096];
                    while let Ok(read @ 1..) = stream.read(&mut buffer) {
                        counted.fetch_add(read, Ordering::SeqCst);
                        if stream.write_all(&buffer[..read]).is_err() {
                            break;
                        }
                    }
                    ended.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Echo {
            address,
            received,
            closed,
        }
    }

    fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    fn closed(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Runs `scenario` on a thread inside `lab`'s namespace.
fn inside<T: Send>(lab: &Netns, scenario: impl FnOnce() -> T + Send) -> T {
    thread::scope(|scope| {
        let thread = scope.spawn(|| {
            lab.enter_current_thread();
            scenario()
        });
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// An echo server, a lab with a relay to it, and a client inside that has
/// made one round trip (`one`): where most faults start. Runs `scenario` on
/// the client's thread, inside the lab.
fn after_one_round_trip(scenario: impl FnOnce(&Echo, &Netns, SocketAddr, &mut TcpStream) + Send) {
    let echo = Echo::start();
    let lab = Netns::new();
    let through = lab.forward(echo.address);
    inside(&lab, || {
        let mut client = connect(through);
        client.write_all(b"one").unwrap();
        answer(&mut client, b"one", ANSWER);
        scenario(&echo, &lab, through, &mut client);
    });
}

/// A command for a tool of /usr/sbin, whatever the test's PATH.
fn sbin(command: &mut Command) -> &mut Command {
    let path = std::env::var("PATH").unwrap_or_default();
    command.env("PATH", format!("{path}:/usr/sbin:/sbin"))
}

fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&address, ANSWER).expect("connect through the link");
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads exactly `expected` within `within`.
fn answer(stream: &mut TcpStream, expected: &[u8], within: Duration) {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut got = vec![0u8; expected.len()];
    stream
        .read_exact(&mut got)
        .unwrap_or_else(|e| panic!("no answer {expected:?} within {within:?}: {e}"));
    assert_eq!(got, expected);
}

/// Asserts that nothing (no byte, no EOF, no error) comes within `within`.
/// A read a signal interrupts (a child of the test exiting) waits again
/// for the rest of the time.
fn no_answer(stream: &mut TcpStream, within: Duration) {
    let until = Instant::now() + within;
    let mut buffer = [0u8; 64];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => panic!("expected silence, got {other:?}"),
        }
    }
}

fn wait_until(what: &str, within: Duration, condition: impl Fn() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < within,
            "{what} did not happen within {within:?}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// The inode of the network namespace of the calling thread.
fn current_namespace() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino()
}

fn namespace_of(lab: &Netns) -> u64 {
    std::fs::metadata(format!("/var/run/netns/{}", lab.name()))
        .unwrap()
        .ino()
}

#[test]
fn a_thread_inside_reaches_the_server_through_the_link() {
    let echo = Echo::start();
    let lab = Netns::new();
    let through = lab.forward(echo.address);
    assert_eq!(through.ip(), lab.host_address());
    let root = current_namespace();
    for _ in 0..2 {
        // Twice: the handle is opened once and entered by each thread.
        inside(&lab, || {
            assert_eq!(current_namespace(), namespace_of(&lab));
            // The loopback server is not reachable from inside: only the
            // link leads out.
            assert!(TcpStream::connect_timeout(&echo.address, SILENCE).is_err());
            let mut client = connect(through);
            assert_eq!(client.local_addr().unwrap().ip(), lab.namespace_address());
            client.write_all(b"hello").unwrap();
            answer(&mut client, b"hello", ANSWER);
        });
    }
    assert_eq!(current_namespace(), root, "only the entering thread moved");
    assert_eq!(lab.dropped_packets(), 0);
}

#[test]
fn cut_drops_both_ways_and_heal_delivers_on_the_same_connection() {
    after_one_round_trip(|echo, lab, through, client| {
        lab.cut();
        client.write_all(b"two").unwrap();
        no_answer(client, SILENCE);
        let refused = TcpStream::connect_timeout(&through, SILENCE).unwrap_err();
        assert!(
            matches!(refused.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock),
            "a new connection during the cut: {refused:?}"
        );
        assert_eq!(echo.received(), 3, "the request did not get through");
        assert!(lab.dropped_packets() > 0);

        lab.heal();
        // The same connection: TCP's retransmission delivers the request,
        // then the answer. Packets were dropped, the connection never closed.
        answer(client, b"two", RETRANSMITTED);
        assert_eq!(echo.received(), 6);
        assert_eq!(lab.dropped_packets(), 0, "a heal starts a clean count");
    });
}

#[test]
fn drop_replies_applies_the_request_and_loses_the_answer() {
    after_one_round_trip(|echo, lab, _, client| {
        lab.drop_replies();
        client.write_all(b"two").unwrap();
        wait_until("the request's arrival", ANSWER, || echo.received() == 6);
        no_answer(client, SILENCE);

        lab.heal();
        answer(client, b"two", RETRANSMITTED);
        assert_eq!(echo.received(), 6, "the request arrived once");
    });
}

#[test]
fn drop_requests_loses_the_request() {
    after_one_round_trip(|echo, lab, _, client| {
        lab.drop_requests();
        // Written without an error: the local drop stays inside the kernel.
        client.write_all(b"two").unwrap();
        no_answer(client, SILENCE);
        assert_eq!(echo.received(), 3, "the request did not get through");
        assert!(lab.dropped_packets() > 0);

        lab.heal();
        answer(client, b"two", RETRANSMITTED);
        assert_eq!(echo.received(), 6);
    });
}

/// The packets the lab's rules dropped so far, (into, out of) the namespace,
/// from `iptables -L -v` run inside it.
fn dropped_each_way(lab: &Netns) -> (u64, u64) {
    let out = sbin(&mut lab.command("iptables"))
        .args(["-L", "WORKERID-FAULTS", "-v", "-n", "-x"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (mut into, mut out_of) = (0, 0);
    for line in String::from_utf8_lossy(&out.stdout).lines().skip(2) {
        // pkts bytes target prot opt in out source destination ...
        let fields: Vec<&str> = line.split_whitespace().collect();
        let packets: u64 = fields[0].parse().unwrap();
        match (fields[5], fields[6]) {
            (interface, "*") if interface.starts_with("wn") => into += packets,
            ("*", interface) if interface.starts_with("wn") => out_of += packets,
            _ => panic!("unexpected rule: {line}"),
        }
    }
    (into, out_of)
}

#[test]
fn lose_drops_packets_each_way_and_tcp_delivers_every_byte_in_order() {
    let echo = Echo::start();
    let lab = Netns::new();
    let through = lab.forward(echo.address);
    inside(&lab, || {
        let mut client = connect(through);
        // Low enough that a segment lost over and over (TCP doubles its
        // wait each time: 0.2 s, 0.6 s, 1.4 s, 3 s, 6.2 s...) stays rare.
        lab.lose(20);
        let start = Instant::now();
        let mut round_trips = 0;
        // Until both directions lost packets, with a few round trips at
        // least; a 20 % loss gets there in about ten.
        while round_trips < 5 || {
            let (into, out_of) = dropped_each_way(&lab);
            into == 0 || out_of == 0
        } {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no loss both ways after {round_trips} round trips: {:?}",
                dropped_each_way(&lab)
            );
            let message = format!("message {round_trips:04}");
            client.write_all(message.as_bytes()).unwrap();
            answer(&mut client, message.as_bytes(), Duration::from_secs(30));
            round_trips += 1;
        }
        let (into, out_of) = dropped_each_way(&lab);
        assert_eq!(lab.dropped_packets(), into + out_of);
        lab.heal();
        assert_eq!(echo.received(), round_trips * 12);
    });
}

#[test]
fn cut_reset_heal_leaves_a_half_open_connection() {
    after_one_round_trip(|echo, lab, _, client| {
        lab.cut();
        lab.reset_connections();
        wait_until("the server seeing the close", ANSWER, || echo.closed() == 1);
        lab.heal();
        // The RST was dropped: the client still believes in its connection.
        no_answer(client, Duration::from_millis(300));
        // Its next write reaches a host that knows no such connection.
        client.write_all(b"two").unwrap();
        client.set_read_timeout(Some(RETRANSMITTED)).unwrap();
        let error = client.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{error:?}");
        assert_eq!(echo.received(), 3);
    });
}

#[test]
fn reset_connections_alone_resets_the_client() {
    after_one_round_trip(|echo, lab, through, client| {
        lab.reset_connections();
        client.set_read_timeout(Some(ANSWER)).unwrap();
        let error = client.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{error:?}");
        wait_until("the server seeing the close", ANSWER, || echo.closed() == 1);
        // The relay still takes new connections.
        let mut again = connect(through);
        again.write_all(b"two").unwrap();
        answer(&mut again, b"two", ANSWER);
    });
}

#[test]
fn stall_accepts_but_moves_nothing_until_released() {
    let echo = Echo::start();
    let lab = Netns::new();
    let through = lab.forward(echo.address);
    inside(&lab, || {
        let mut open = connect(through);
        open.write_all(b"one").unwrap();
        answer(&mut open, b"one", ANSWER);

        lab.stall(true);
        open.write_all(b"two").unwrap();
        let mut new = connect(through);
        new.write_all(b"new").unwrap();
        no_answer(&mut open, SILENCE);
        no_answer(&mut new, Duration::from_millis(50));
        assert_eq!(echo.received(), 3, "nothing was forwarded while stalled");
        assert_eq!(lab.dropped_packets(), 0, "no packet was dropped either");

        lab.stall(false);
        answer(&mut open, b"two", ANSWER);
        answer(&mut new, b"new", ANSWER);
    });
}

#[test]
fn delay_slows_each_way_without_adding_up() {
    let echo = Echo::start();
    let lab = Netns::new();
    let through = lab.forward(echo.address);
    inside(&lab, || {
        let mut client = connect(through);
        lab.delay(Duration::from_millis(300));
        let started = Instant::now();
        // Three writes 100 ms apart: each is 300 ms late each way (the
        // last back at 800 ms), not 300 ms after the one before (which
        // would be 1.2 s and more).
        for word in [b"one", b"two", b"six"] {
            client.write_all(word).unwrap();
            thread::sleep(Duration::from_millis(100));
        }
        answer(&mut client, b"onetwosix", ANSWER);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(800) && took < Duration::from_millis(1100),
            "the last of three round trips took {took:?} with 300 ms each way"
        );
        assert_eq!(lab.dropped_packets(), 0, "nothing was dropped");

        lab.delay(Duration::ZERO);
        let started = Instant::now();
        client.write_all(b"now").unwrap();
        answer(&mut client, b"now", ANSWER);
        assert!(started.elapsed() < Duration::from_millis(300));
    });
}

#[test]
fn command_runs_the_program_itself_inside_the_namespace() {
    let lab = Netns::new();
    let mut child = lab
        .command("sh")
        .args(["-c", "echo $$; readlink /proc/$$/ns/net; exec cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut printed = String::new();
    while printed.matches('\n').count() < 2 {
        let mut byte = [0u8; 1];
        assert_eq!(stdout.read(&mut byte).unwrap(), 1, "output: {printed:?}");
        printed.push(char::from(byte[0]));
    }
    let mut lines = printed.lines();
    let pid: u32 = lines.next().unwrap().parse().unwrap();
    assert_eq!(pid, child.id(), "ip netns exec execs the program, no fork");
    assert_eq!(
        lines.next().unwrap(),
        format!("net:[{}]", namespace_of(&lab))
    );
    // Signals to the child reach the program.
    let pid = libc::pid_t::try_from(pid).unwrap();
    // SAFETY: plain signals to our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    wait_until("the program stopping", ANSWER, || state() == "T");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Whether `ip netns list` shows `name`.
fn listed(name: &str) -> bool {
    let out = sbin(&mut Command::new("ip"))
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|line| line.split_whitespace().next() == Some(name))
}

#[test]
fn drop_removes_the_namespace_and_the_link() {
    let echo = Echo::start();
    let lab = Netns::new();
    let through = lab.forward(echo.address);
    let (name, interface) = (lab.name().to_string(), lab.host_interface().to_string());
    let link = format!("/sys/class/net/{interface}");
    assert!(listed(&name), "ip netns list shows {name}");
    assert!(std::path::Path::new(&link).exists());
    inside(&lab, || {
        let mut client = connect(through);
        client.write_all(b"one").unwrap();
        answer(&mut client, b"one", ANSWER);
        lab.cut();
    });
    drop(lab);
    assert!(!listed(&name), "{name} outlived its handle");
    assert!(
        !std::path::Path::new(&link).exists(),
        "{interface} outlived its handle"
    );
    assert!(!std::path::Path::new("/var/run/netns").join(&name).exists());
    wait_until("the relay closing its connection", ANSWER, || {
        echo.closed() == 1
    });
}

#[test]
fn a_thread_inside_can_forward_and_drop() {
    let echo = Echo::start();
    let lab = Netns::new();
    let (name, interface) = (lab.name().to_string(), lab.host_interface().to_string());
    let address = echo.address;
    thread::spawn(move || {
        lab.enter_current_thread();
        // The relay still listens on the host end, outside.
        let through = lab.forward(address);
        let mut client = connect(through);
        client.write_all(b"one").unwrap();
        answer(&mut client, b"one", ANSWER);
        drop(lab);
    })
    .join()
    .unwrap();
    assert!(!listed(&name), "{name} outlived its handle");
    let link = format!("/sys/class/net/{interface}");
    assert!(
        !std::path::Path::new(&link).exists(),
        "{interface} outlived its handle"
    );
}

#[test]
fn redis_applies_a_command_whose_answer_is_lost() {
    let redis = RedisServer::start(RedisConfig::default());
    let lab = Netns::new();
    let through = lab.forward(([127, 0, 0, 1], redis.port()).into());
    // Opened here, in the root namespace, and used from inside: a socket
    // keeps the namespace it was made in.
    let mut observer = TcpStream::connect(("127.0.0.1", redis.port())).unwrap();
    inside(&lab, || {
        let mut client = connect(through);
        client.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        answer(&mut client, b"+PONG\r\n", ANSWER);

        lab.drop_replies();
        client
            .write_all(b"*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n")
            .unwrap();
        no_answer(&mut client, SILENCE);
        // Applied although its answer is lost.
        observer
            .write_all(b"*2\r\n$3\r\nGET\r\n$7\r\ncounter\r\n")
            .unwrap();
        answer(&mut observer, b"$1\r\n1\r\n", ANSWER);

        lab.heal();
        answer(&mut client, b":1\r\n", RETRANSMITTED);
    });
}

#[test]
fn netns_is_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Netns>();
}

#[test]
fn a_server_inside_stays_reachable_while_its_store_is_cut_off() {
    let store = Echo::start();
    let lab = Netns::new();
    let through = lab.forward(store.address);
    // A server inside the lab (an ID service, say) on the lab's address,
    // with a connection to its store through the relay.
    let (listener, mut to_store) = inside(&lab, || {
        let listener = TcpListener::bind((lab.namespace_address(), 0)).unwrap();
        (listener, connect(through))
    });
    let served = listener.local_addr().unwrap();
    lab.cut();
    to_store.write_all(b"renew").unwrap();
    no_answer(&mut to_store, SILENCE);
    // Its own clients, in the root namespace, still reach it.
    let mut client = connect(served);
    let (mut accepted, _) = listener.accept().unwrap();
    client.write_all(b"id?").unwrap();
    let mut asked = [0u8; 3];
    accepted.read_exact(&mut asked).unwrap();
    assert_eq!(&asked, b"id?");
    assert_eq!(store.received(), 0, "the store was cut off");
    lab.heal();
    answer(&mut to_store, b"renew", RETRANSMITTED);
}
