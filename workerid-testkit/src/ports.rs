//! Free loopback ports.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// Ports this process has handed out, so two servers never get the same one.
static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A TCP port on 127.0.0.1 that is free now and was not handed out before by
/// this process. Ports below 20000 (where default ports live) and above
/// 50000 (so that `port + 10000`, Redis Cluster's bus port, stays valid) are
/// never returned.
pub fn free_port() -> u16 {
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    for _ in 0..10_000 {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind a loopback port");
        let port = listener.local_addr().expect("a bound address").port();
        if (20_000..50_000).contains(&port)
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
            && given.insert(port)
        {
            return port;
        }
    }
    panic!("no free loopback port found");
}
