//! TCP relays that copy bytes unchanged and can be stalled, slowed, made to forget
//! their connections, silence them, or stopped: a [`Netns`](crate::netns::Netns) forwards
//! its link's host end to the servers through one, and a test can put one
//! on loopback in front of a server to take the server away from a client
//! it already connected ([`Relay::in_front_of`]).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Sets `SO_LINGER` to 0 s: closing the socket then aborts the connection
/// (RST) instead of closing it (FIN), and the socket is gone at once.
fn linger_zero(socket: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a `linger` of the size given.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::addr_of!(linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Relays that share their faults: every listening address forwards to its
/// own target, and a stall, reset or stop applies to all of them.
///
/// ```no_run
/// use workerid_testkit::relay::Relay;
/// let (relay, url) = Relay::in_front_of("redis://127.0.0.1:6390/");
/// // ... a client connects to `url` ...
/// relay.stop(); // the server is gone for that client: refused and reset
/// ```
#[derive(Debug, Default)]
pub struct Relay {
    stalled: Mutex<bool>,
    /// Signalled when `stalled` turns false, and on resets and stop.
    wake: Condvar,
    stopped: AtomicBool,
    /// How long every chunk read waits before it is written on, in µs.
    delay_us: AtomicU64,
    /// The open connections; a connection's sockets close when the last
    /// `Arc` (here and in its two threads) goes.
    connections: Mutex<Vec<Arc<Connection>>>,
    /// The relays' listening addresses, to wake their accepting threads.
    listeners: Mutex<Vec<SocketAddr>>,
    /// Each listening address's target, read for every connection it
    /// accepts (see [`Relay::redirect`]).
    targets: Mutex<Vec<(SocketAddr, SocketAddr)>>,
}

/// A client's connection through a relay.
#[derive(Debug)]
struct Connection {
    client: TcpStream,
    /// The connection to the target, once made.
    upstream: OnceLock<TcpStream>,
    /// Set by [`Relay::reset_connections`]: the relay's threads end without
    /// closing anything gracefully.
    reset: AtomicBool,
    /// Set by [`Relay::silence_connections`]: no byte moves on, for good.
    silenced: AtomicBool,
}

impl Relay {
    /// A relay on loopback to the server of `url` (whose authority is
    /// `127.0.0.1:<port>`, as the test kit's servers' are), and `url` with
    /// the relay's address in its place.
    ///
    /// # Panics
    /// When `url` names no `127.0.0.1:<port>`.
    pub fn in_front_of(url: &str) -> (Arc<Relay>, String) {
        const HOST: &str = "127.0.0.1:";
        let at = url
            .find(HOST)
            .unwrap_or_else(|| panic!("{url:?} names no 127.0.0.1:<port>"));
        let digits = url[at + HOST.len()..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(url.len(), |n| at + HOST.len() + n);
        let target: SocketAddr = url[at..digits]
            .parse()
            .unwrap_or_else(|e| panic!("{url:?}: {e}"));
        let relay = Arc::new(Relay::default());
        let address = relay.forward(Ipv4Addr::LOCALHOST, target);
        let through = format!("{}{address}{}", &url[..at], &url[digits..]);
        (relay, through)
    }

    /// Listens on an OS-picked port of `host` and forwards every connection
    /// to `target`; returns the listening address. See
    /// [`Netns::forward`](crate::netns::Netns::forward).
    ///
    /// # Panics
    /// When the port cannot be bound or the relay's thread not started.
    pub fn forward(self: &Arc<Self>, host: Ipv4Addr, target: SocketAddr) -> SocketAddr {
        let listener = TcpListener::bind((host, 0)).expect("bind the relay on the link's host end");
        let address = listener.local_addr().expect("the relay's address");
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(address);
        self.targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((address, target));
        let relay = Arc::clone(self);
        thread::Builder::new()
            .name("workerid-relay".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if relay.stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let target = relay.target_of(address).unwrap_or(target);
                    let relay = Arc::clone(&relay);
                    let _ = thread::Builder::new()
                        .name("workerid-relay".into())
                        .spawn(move || relay.serve(client, target));
                }
            })
            .expect("start the relay's thread");
        address
    }

    /// Sends the connections the relay at `listening` accepts from now on
    /// to `target` instead (what moving a virtual IP or repointing a proxy
    /// does); the connections already made stay where they are.
    ///
    /// # Panics
    /// When no relay of this one listens at `listening`.
    pub fn redirect(&self, listening: SocketAddr, target: SocketAddr) {
        let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        let entry = targets
            .iter_mut()
            .find(|(address, _)| *address == listening)
            .unwrap_or_else(|| panic!("no relay listens at {listening}"));
        entry.1 = target;
    }

    fn target_of(&self, listening: SocketAddr) -> Option<SocketAddr> {
        let targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        targets
            .iter()
            .find(|(address, _)| *address == listening)
            .map(|(_, target)| *target)
    }

    /// The ports the relays listen on.
    pub fn ports(&self) -> Vec<u16> {
        let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        listeners.iter().map(SocketAddr::port).collect()
    }

    /// While `true`, no bytes move: see [`Netns::stall`](crate::netns::Netns::stall).
    pub fn stall(&self, stalled: bool) {
        *self.stalled.lock().unwrap_or_else(|e| e.into_inner()) = stalled;
        self.wake.notify_all();
    }

    /// Every chunk read from now on is written on `delay` later (zero: at
    /// once): see [`Netns::delay`](crate::netns::Netns::delay).
    pub fn delay(&self, delay: Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.delay_us.store(us, Ordering::SeqCst);
    }

    /// The connections open now go silent for good: the relay keeps their
    /// sockets open, so the kernel still acknowledges what the client
    /// sends, but moves none of their bytes on, either way (a server that
    /// vanished behind a load balancer or NAT that still answers for it).
    /// Connections made later pass as before. Ended only by
    /// [`reset_connections`](Self::reset_connections) or [`stop`](Self::stop).
    pub fn silence_connections(&self) {
        let connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        for connection in connections.iter() {
            connection.silenced.store(true, Ordering::SeqCst);
        }
    }

    /// Aborts every connection: see
    /// [`Netns::reset_connections`](crate::netns::Netns::reset_connections);
    /// `lab` names the relays in the panic message.
    ///
    /// # Panics
    /// When a relay thread does not let go of its connection within 5 s.
    pub fn reset_connections(&self, lab: &str) {
        let taken =
            std::mem::take(&mut *self.connections.lock().unwrap_or_else(|e| e.into_inner()));
        for connection in &taken {
            connection.reset.store(true, Ordering::SeqCst);
            linger_zero(&connection.client);
            // Wakes the relay's reads without sending anything; the client
            // gets the RST when the socket closes.
            let _ = connection.client.shutdown(Shutdown::Read);
            if let Some(upstream) = connection.upstream.get() {
                let _ = upstream.shutdown(Shutdown::Both);
            }
        }
        self.wake_all();
        let left: Vec<_> = taken.iter().map(Arc::downgrade).collect();
        drop(taken);
        let start = Instant::now();
        let mut escalated = false;
        while left.iter().any(|c| c.strong_count() > 0) {
            if !escalated && start.elapsed() > Duration::from_millis(200) {
                // A relay thread blocked writing to a client whose window
                // is full: only a shutdown for writing wakes it.
                for connection in left.iter().filter_map(|c| c.upgrade()) {
                    let _ = connection.client.shutdown(Shutdown::Both);
                }
                escalated = true;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the relay of {lab} did not close its connections"
            );
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Forwards `client` to `target` until either side closes.
    fn serve(self: &Arc<Self>, client: TcpStream, target: SocketAddr) {
        let _ = client.set_nodelay(true);
        let connection = Arc::new(Connection {
            client,
            upstream: OnceLock::new(),
            reset: AtomicBool::new(false),
            silenced: AtomicBool::new(false),
        });
        {
            let mut connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
            // Checked under the lock `stop` shuts the sockets down under.
            if self.stopped.load(Ordering::SeqCst) {
                return;
            }
            connections.push(Arc::clone(&connection));
        }
        if self.pass(&connection) {
            if let Ok(upstream) = TcpStream::connect(target) {
                let _ = upstream.set_nodelay(true);
                let upstream = connection.upstream.get_or_init(|| upstream);
                // A reset or stop that came before the upstream was known
                // could not close it.
                if connection.reset.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst) {
                    let _ = upstream.shutdown(Shutdown::Both);
                }
                let (relay, other) = (Arc::clone(self), Arc::clone(&connection));
                let back = thread::Builder::new()
                    .name("workerid-relay".into())
                    .spawn(move || {
                        if let Some(upstream) = other.upstream.get() {
                            relay.pump(upstream, &other.client, &other);
                        }
                    });
                self.pump(&connection.client, upstream, &connection);
                if let Ok(back) = back {
                    let _ = back.join();
                }
            }
        }
        let mut connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        connections.retain(|c| !Arc::ptr_eq(c, &connection));
    }

    /// Copies `from` to `to` until `from` ends (then closes `to` for
    /// writing, unless reset) or the connection is reset. Each chunk is
    /// written on at its due time, the relay's delay after it was read, by
    /// a thread of its own, so delays do not add up; the queue is short, so
    /// a slow reader still slows the writer down (TCP flow control).
    fn pump(self: &Arc<Self>, mut from: &TcpStream, to: &TcpStream, connection: &Arc<Connection>) {
        let (queue, chunks) = sync_channel::<(Instant, Vec<u8>)>(16);
        let writer = {
            let (relay, connection) = (Arc::clone(self), Arc::clone(connection));
            let to = to.try_clone();
            thread::Builder::new()
                .name("workerid-relay".into())
                .spawn(move || {
                    if let Ok(to) = to {
                        relay.write_due(chunks, &to, &connection);
                    }
                })
        };
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let read = match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            let due = Instant::now() + Duration::from_micros(self.delay_us.load(Ordering::SeqCst));
            if !self.pass(connection) || queue.send((due, buffer[..read].to_vec())).is_err() {
                break;
            }
        }
        drop(queue);
        if let Ok(writer) = writer {
            let _ = writer.join();
        }
    }

    /// Writes the chunks `pump` reads to `to`, each at its due time.
    fn write_due(
        &self,
        chunks: Receiver<(Instant, Vec<u8>)>,
        mut to: &TcpStream,
        connection: &Connection,
    ) {
        for (due, chunk) in chunks {
            if !self.wait_until(due, connection)
                || !self.pass(connection)
                || to.write_all(&chunk).is_err()
            {
                // Ends the reader too, which then finds the queue closed.
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
        if !connection.reset.load(Ordering::SeqCst) {
            let _ = to.shutdown(Shutdown::Write);
        }
    }

    /// Waits until `due`; `false` when the connection was reset or the
    /// relay stopped meanwhile (both wake the wait).
    fn wait_until(&self, due: Instant, connection: &Connection) -> bool {
        let over =
            || connection.reset.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst);
        let mut guard = self.stalled.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if over() {
                return false;
            }
            let now = Instant::now();
            if now >= due {
                return true;
            }
            guard = self
                .wake
                .wait_timeout(guard, due - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits while the relay is stalled or the connection silenced; `false`
    /// when the connection was reset or the relay stopped meanwhile.
    fn pass(&self, connection: &Connection) -> bool {
        let over =
            || connection.reset.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst);
        let mut stalled = self.stalled.lock().unwrap_or_else(|e| e.into_inner());
        while (*stalled || connection.silenced.load(Ordering::SeqCst)) && !over() {
            stalled = self.wake.wait(stalled).unwrap_or_else(|e| e.into_inner());
        }
        !over()
    }

    /// Wakes every thread waiting in [`pass`](Self::pass). Taking the lock
    /// first makes sure none is between its check and its wait.
    fn wake_all(&self) {
        let _stalled = self.stalled.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    /// Stops accepting (the ports then refuse connections) and closes
    /// every connection.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.wake_all();
        let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        for address in listeners.iter() {
            // Wakes the accepting thread, which then sees `stopped`.
            let _ = TcpStream::connect_timeout(address, Duration::from_secs(1));
        }
        let connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        for connection in connections.iter() {
            let _ = connection.client.shutdown(Shutdown::Both);
            if let Some(upstream) = connection.upstream.get() {
                let _ = upstream.shutdown(Shutdown::Both);
            }
        }
    }
}
