//! PostgreSQL with a streaming standby that is promoted when its primary
//! dies, behind a relay that stands for the address clients use (a virtual
//! IP, or a proxy that follows the primary): after a failover the relay
//! sends new connections to the new primary, and a new standby streams
//! from it.
//!
//! ```no_run
//! use workerid_testkit::postgres_standby::PostgresFailover;
//! let mut pair = PostgresFailover::start(true); // commits wait for the standby
//! let url = pair.url(); // through the relay
//! let promoted_after = pair.fail_over(); // kill -9 the primary, promote the standby
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::postgres::{as_postgres, bin_dir, initdb, is_ready, postgres_user};
use crate::relay::Relay;
use crate::{free_port, run, ServerProcess, ServerSpec};

/// The name the standby streams under (its `cluster_name`), which the
/// primary's `synchronous_standby_names` waits for.
const STANDBY: &str = "standby";

/// A primary, its standby, and the relay in front of the primary.
#[derive(Debug)]
pub struct PostgresFailover {
    primary: Node,
    standby: Node,
    /// Primaries killed by a failover, kept (stopped) until the end.
    killed: Vec<Node>,
    relay: Arc<Relay>,
    address: SocketAddr,
    synchronous: bool,
}

#[derive(Debug)]
struct Node {
    process: ServerProcess,
    port: u16,
}

impl PostgresFailover {
    /// Starts a primary and a standby streaming from it. With
    /// `synchronous`, the primary answers a commit once the standby has
    /// flushed it (`synchronous_standby_names`, `synchronous_commit = on`);
    /// without, replication is asynchronous.
    pub fn start(synchronous: bool) -> PostgresFailover {
        let primary = launch(None, synchronous);
        let standby = launch(Some(primary.port), synchronous);
        let relay = Arc::new(Relay::default());
        let address = relay.forward(
            Ipv4Addr::LOCALHOST,
            SocketAddr::from((Ipv4Addr::LOCALHOST, primary.port)),
        );
        PostgresFailover {
            primary,
            standby,
            killed: Vec::new(),
            relay,
            address,
            synchronous,
        }
    }

    /// `postgres://postgres@<the relay>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}/postgres", self.address)
    }

    /// Whether commits wait for the standby.
    pub fn synchronous(&self) -> bool {
        self.synchronous
    }

    /// Kills the primary (SIGKILL), promotes the standby (`pg_ctl
    /// promote`), sends the relay's new connections to it and starts a new
    /// standby streaming from it. Returns how long after the kill the new
    /// primary took writes.
    ///
    /// Panics when the promotion or the new standby fails.
    pub fn fail_over(&mut self) -> Duration {
        self.primary.process.kill();
        let killed = Instant::now();
        run(
            as_postgres("pg_ctl")
                .args(["promote", "-w", "-t", "60", "-D"])
                .arg(self.standby.process.dir().join("data")),
            "pg_ctl promote",
        );
        self.relay.redirect(
            self.address,
            SocketAddr::from((Ipv4Addr::LOCALHOST, self.standby.port)),
        );
        let promoted = killed.elapsed();
        let standby = launch(Some(self.standby.port), self.synchronous);
        let old = std::mem::replace(
            &mut self.primary,
            std::mem::replace(&mut self.standby, standby),
        );
        self.killed.push(old);
        promoted
    }
}

/// Starts a primary, or with `primary` a standby streaming from the server
/// on that port (a base backup of it first).
fn launch(primary: Option<u16>, synchronous: bool) -> Node {
    let bin = bin_dir();
    let (uid, gid) = postgres_user();
    let port = free_port();
    let name = if primary.is_some() {
        "postgres-standby"
    } else {
        "postgres-primary"
    };
    let process = ServerProcess::launch(name, |dir: &Path| {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown the directory");
        let data = dir.join("data");
        match primary {
            None => initdb(&data),
            Some(from) => run(
                as_postgres("pg_basebackup")
                    .args(["-h", "127.0.0.1", "-p", &from.to_string(), "-U", "postgres"])
                    .args(["-X", "stream", "-R", "--no-sync", "--checkpoint=fast", "-D"])
                    .arg(&data),
                "pg_basebackup",
            ),
        }
        let mut settings = vec![
            ("-D", data.display().to_string()),
            ("-p", port.to_string()),
            ("-k", dir.display().to_string()),
            ("-c", "listen_addresses=127.0.0.1".to_string()),
            ("-c", "max_connections=200".to_string()),
            ("-c", "fsync=on".to_string()),
            ("-c", "wal_level=replica".to_string()),
            ("-c", "max_wal_senders=4".to_string()),
            ("-c", "hot_standby=on".to_string()),
            ("-c", format!("cluster_name={STANDBY}")),
            // A standby whose primary died retries every 5 s by default, and
            // a promotion waits for that sleep to end.
            ("-c", "wal_retrieve_retry_interval=200ms".to_string()),
        ];
        if synchronous {
            settings.push(("-c", format!("synchronous_standby_names={STANDBY}")));
        }
        ServerSpec::new(bin.join("postgres"))
            .arg_pairs(&settings)
            .user(uid, gid)
            .stop_signal(libc::SIGINT)
            .ready(move || is_ready(port))
    });
    Node { process, port }
}
