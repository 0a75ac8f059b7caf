//! A TCP setting sqlx does not offer: `TCP_USER_TIMEOUT` on every connection
//! to the database.
//!
//! Without it, a request sent into a partition waits in the kernel's send
//! queue, retransmitted with backoff, for as long as TCP keeps the
//! connection (many minutes). The caller gives up on it after its timeout,
//! but the request is still delivered when the partition heals, and
//! applied: an acquire whose token's lease has ended since then grants a
//! worker ID to no one, and the connection, stuck behind it, keeps a pool
//! slot for that long. With the option set, data left unacknowledged that
//! long ends the connection (and drops what it queued) on Linux.
//!
//! sqlx opens its sockets itself, so each new connection looks for its
//! socket among the process's file descriptors: every TCP socket connected
//! to the database's address gets the option (setting it twice is
//! harmless, and every such socket is a connection of this process to the
//! database).

use std::net::SocketAddr;
use std::time::Duration;

/// Sets `TCP_USER_TIMEOUT` to `timeout` on every socket of this process
/// connected to one of `peers`. Returns how many it set.
#[cfg(target_os = "linux")]
pub(crate) fn set_user_timeout(peers: &[SocketAddr], timeout: Duration) -> usize {
    use std::os::fd::{BorrowedFd, RawFd};

    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut set = 0;
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        // SAFETY: the descriptor is only borrowed for the calls below. If
        // another thread closes it meanwhile, they fail (EBADF) or, for a
        // number reused at once, act on a socket whose peer is checked
        // first.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let peer = socket.peer_addr().ok().and_then(|a| a.as_socket());
        if peer.is_some_and(|peer| peers.contains(&peer))
            && socket.set_tcp_user_timeout(Some(timeout)).is_ok()
        {
            set += 1;
        }
    }
    set
}

/// Elsewhere the option does not exist: nothing is set.
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_user_timeout(_peers: &[SocketAddr], _timeout: Duration) -> usize {
    0
}

/// The addresses `url`'s host and port resolve to (none for SQLite or a
/// Unix socket).
pub(crate) async fn database_addresses(url: &str) -> Vec<SocketAddr> {
    if url.starts_with("sqlite:") {
        return Vec::new();
    }
    let Some((host, port)) = host_and_port(url) else {
        return Vec::new();
    };
    let found = tokio::net::lookup_host((host.as_str(), port)).await;
    match found {
        Ok(addresses) => addresses.collect(),
        Err(e) => {
            tracing::debug!("cannot resolve the database's host {host:?}: {e}");
            Vec::new()
        }
    }
}

/// The host and port of a `postgres://` or `mysql://` URL (the default port
/// when none is given).
fn host_and_port(url: &str) -> Option<(String, u16)> {
    let url = url::Url::parse(url).ok()?;
    let default_port = match url.scheme() {
        "postgres" | "postgresql" => 5432,
        "mysql" | "mariadb" => 3306,
        _ => return None,
    };
    let host = url.host_str().filter(|h| !h.is_empty())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), url.port().unwrap_or(default_port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_ports_come_from_every_url_form() {
        let cases = [
            (
                "postgres://u:p@127.0.0.1:5433/db",
                Some(("127.0.0.1", 5433)),
            ),
            (
                "postgresql://db.example/x?sslmode=require",
                Some(("db.example", 5432)),
            ),
            ("mysql://root@[::1]:3307/ids", Some(("::1", 3307))),
            ("mysql://root@[::1]/ids", Some(("::1", 3306))),
            ("mysql://u:p:q@h/", Some(("h", 3306))),
            ("sqlite://ids.db", None),
            ("postgres:///db?host=/run/postgresql", None),
        ];
        for (url, expected) in cases {
            let got = host_and_port(url);
            assert_eq!(
                got.as_ref().map(|(h, p)| (h.as_str(), *p)),
                expected,
                "{url}"
            );
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_option_reaches_a_socket_connected_to_the_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(address).unwrap();
        let (_server, _) = listener.accept().unwrap();
        assert!(set_user_timeout(&[address], Duration::from_millis(1500)) >= 1);
        let got = socket2::SockRef::from(&client).tcp_user_timeout().unwrap();
        assert_eq!(got, Some(Duration::from_millis(1500)));
    }
}
