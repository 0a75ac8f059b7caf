//! A TCP proxy on a free loopback port in front of an HTTP/2 server
//! without TLS (an etcd member, say) that can make the server slow to
//! answer: the frames of its streams (answers) reach the client `delay`
//! after the proxy read them, in order, while the frames of the connection
//! itself (settings, pings, flow control, GOAWAY) and the client's bytes
//! pass at once. It also counts the connections clients opened through it.
//!
//! Late answers on a healthy connection are what a client sees from an
//! overloaded server: it gave up on a request, and the answer still comes.
//!
//! ```no_run
//! use std::time::Duration;
//! use workerid_testkit::proxy::DelayingProxy;
//! let proxy = DelayingProxy::start("127.0.0.1:2379".parse().unwrap());
//! let through = proxy.address(); // connect here instead
//! proxy.set_delay(Duration::from_secs(3));
//! assert_eq!(proxy.connections(), 0);
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The proxy; it stops, and closes every connection through it, when dropped.
#[derive(Debug)]
pub struct DelayingProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    /// How long the server's bytes are held, in µs.
    delay_us: AtomicU64,
    connections: AtomicUsize,
    stopped: AtomicBool,
    /// Every socket the proxy opened, shut down when it stops.
    sockets: Mutex<Vec<TcpStream>>,
}

impl DelayingProxy {
    /// A proxy to `server`, passing everything at once until
    /// [`set_delay`](Self::set_delay). A client whose connection to the
    /// server fails is disconnected at once (and not counted).
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub fn start(server: SocketAddr) -> DelayingProxy {
        // An ephemeral port, never a default one; the OS picks it, so no
        // other process can take it between the choice and the bind.
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind a loopback port");
        let address = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared::default());
        let accepting = Arc::clone(&shared);
        thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopped.load(Ordering::Acquire) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(upstream) = TcpStream::connect(server) else {
                    continue;
                };
                accepting.connections.fetch_add(1, Ordering::AcqRel);
                relay(client, upstream, &accepting);
            }
        });
        DelayingProxy { address, shared }
    }

    /// Where clients connect: `127.0.0.1:<port>`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Holds every frame of a stream the server sends from now on for
    /// `delay` (zero: passes them at once). Frames already held keep their
    /// own delay, and frames read later never overtake them.
    pub fn set_delay(&self, delay: Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.delay_us.store(us, Ordering::Release);
    }

    /// How many connections clients opened through the proxy so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Acquire)
    }
}

impl Drop for DelayingProxy {
    fn drop(&mut self) {
        // Set before the sockets are shut down under the lock: a connection
        // accepted meanwhile then either is among them or, checking under
        // the lock, sees `stopped` and shuts itself down (see `relay`).
        self.shared.stopped.store(true, Ordering::Release);
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect(self.address);
        let sockets = self
            .shared
            .sockets
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for socket in sockets.iter() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `client`'s bytes to `upstream` at once, and `upstream`'s frames
/// to `client`: a stream's after the delay in force when it was read, the
/// connection's at once.
fn relay(client: TcpStream, upstream: TcpStream, shared: &Arc<Shared>) {
    let (Ok(client_reader), Ok(upstream_writer), Ok(upstream_reader)) = (
        client.try_clone(),
        upstream.try_clone(),
        upstream.try_clone(),
    ) else {
        return;
    };
    {
        let mut sockets = shared.sockets.lock().unwrap_or_else(|e| e.into_inner());
        for socket in [&client, &upstream] {
            if shared.stopped.load(Ordering::Acquire) {
                let _ = socket.shutdown(Shutdown::Both);
            } else if let Ok(copy) = socket.try_clone() {
                sockets.push(copy);
            }
        }
    }
    thread::spawn(move || copy(client_reader, upstream_writer));
    let client = Arc::new(Mutex::new(client));
    let (held, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reading = Arc::clone(shared);
    // How many frames of this connection are held back now.
    let holding = Arc::new(AtomicUsize::new(0));
    let held_now = Arc::clone(&holding);
    let at_once = Arc::clone(&client);
    thread::spawn(move || {
        let mut upstream = upstream_reader;
        while let Some((stream, frame)) = next_frame(&mut upstream) {
            let delay = Duration::from_micros(reading.delay_us.load(Ordering::Acquire));
            // A frame read while none is held may pass at once without
            // overtaking another.
            if stream == 0 || delay.is_zero() && held_now.load(Ordering::Acquire) == 0 {
                let mut client = at_once.lock().unwrap_or_else(|e| e.into_inner());
                if client.write_all(&frame).is_err() {
                    return;
                }
            } else {
                held_now.fetch_add(1, Ordering::AcqRel);
                if held.send((Instant::now() + delay, frame)).is_err() {
                    return;
                }
            }
        }
    });
    thread::spawn(move || {
        for (at, frame) in due {
            thread::sleep(at.saturating_duration_since(Instant::now()));
            let mut client = client.lock().unwrap_or_else(|e| e.into_inner());
            let written = client.write_all(&frame);
            holding.fetch_sub(1, Ordering::AcqRel);
            if written.is_err() {
                return;
            }
        }
        let client = client.lock().unwrap_or_else(|e| e.into_inner());
        let _ = client.shutdown(Shutdown::Write);
    });
}

/// The next HTTP/2 frame from `from`, whole (its 9-byte header and its
/// payload), with its stream ID; `None` when the connection ends.
fn next_frame(from: &mut TcpStream) -> Option<(u32, Vec<u8>)> {
    let mut frame = vec![0u8; 9];
    from.read_exact(&mut frame).ok()?;
    let length = u32::from_be_bytes([0, frame[0], frame[1], frame[2]]) as usize;
    let stream = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
    frame.resize(9 + length, 0);
    from.read_exact(&mut frame[9..]).ok()?;
    Some((stream, frame))
}

/// Copies `from` to `to` until either closes.
fn copy(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}
