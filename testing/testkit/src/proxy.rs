//! A TCP proxy on a free loopback port that can hold back a server's
//! answers: every byte the server sends reaches the client `delay` after
//! the proxy read it (in order), while the client's bytes pass at once.
//! It also counts the connections clients opened through it.
//!
//! Late answers are what a client sees from an overloaded server: it gave
//! up on a request, and the answer still comes.
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
    /// [`set_delay`](Self::set_delay).
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub fn start(server: SocketAddr) -> DelayingProxy {
        let listener = TcpListener::bind(("127.0.0.1", crate::free_port()))
            .expect("bind the proxy's loopback port");
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

    /// Holds every byte the server sends from now on for `delay` (zero:
    /// passes them at once). Bytes already held keep their own delay.
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

/// Copies `client`'s bytes to `upstream` at once, and `upstream`'s to
/// `client` each after the delay in force when it was read.
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
            if let Ok(copy) = socket.try_clone() {
                sockets.push(copy);
            }
        }
    }
    thread::spawn(move || copy(client_reader, upstream_writer));
    let (held, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reading = Arc::clone(shared);
    thread::spawn(move || {
        let mut upstream = upstream_reader;
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match upstream.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let delay = Duration::from_micros(reading.delay_us.load(Ordering::Acquire));
                    if held
                        .send((Instant::now() + delay, buffer[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    thread::spawn(move || {
        let mut client = client;
        for (at, bytes) in due {
            thread::sleep(at.saturating_duration_since(Instant::now()));
            if client.write_all(&bytes).is_err() {
                return;
            }
        }
        let _ = client.shutdown(Shutdown::Write);
    });
}

/// Copies `from` to `to` until either closes.
fn copy(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}
