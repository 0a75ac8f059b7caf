//! workerid-client's `ServerStore` as the conformance suites' store: a real
//! `workerid-server` process (one per test binary) in front of a real store,
//! reached over its gRPC API.
#![allow(dead_code)]

use std::net::TcpStream;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use workerid::segment::SegmentStore;
use workerid::LeaseStore;
use workerid_client::ServerStore;
use workerid_conformance::{SegmentFactory, StoreFactory};
use workerid_testkit::{ServerProcess, ServerSpec};

/// The server's gRPC URL, and the variable that hands it to this binary
/// run again as a child process (the multi-process scenarios).
pub struct ThroughServer {
    url: String,
    env: &'static str,
}

/// A `workerid-server` on `store`, serving gRPC (snowflake off, segments
/// allowed on any store); the process and its gRPC URL.
pub fn launch(store: &str) -> (ServerProcess, String) {
    let (process, port) = launch_with(store, "");
    (process, format!("http://127.0.0.1:{port}"))
}

/// As [`launch`], with more top-level settings (`settings`, TOML lines);
/// the process and its gRPC port.
pub fn launch_with(store: &str, settings: &str) -> (ServerProcess, u16) {
    let (http, grpc) = (workerid_testkit::free_port(), workerid_testkit::free_port());
    let process = ServerProcess::launch("workerid-server", |dir| {
        let config = dir.join("server.toml");
        std::fs::write(
            &config,
            format!(
                "store = \"{store}\"\nlisten = \"127.0.0.1:{http}\"\n\
                 grpc_listen = \"127.0.0.1:{grpc}\"\nallow_volatile_segments = true\n\
                 {settings}[snowflake]\nenabled = false\n"
            ),
        )
        .expect("write the server's config");
        ServerSpec::new(env!("CARGO_BIN_EXE_workerid-server"))
            .args(["--config".to_string(), config.display().to_string()])
            .ready(move || TcpStream::connect(("127.0.0.1", grpc)).is_ok())
    });
    (process, grpc)
}

/// A SQLite file in a directory that outlives the test binary's servers
/// (removed when the binary exits).
pub fn sqlite_file() -> String {
    let dir = workerid_testkit::binary_temp_dir("workerid-server-sqlite-");
    workerid_testkit::sqlite_url(&dir.join("ids.db"))
}

/// The gRPC URL of a server on `store()` started once for this test binary
/// (or the one `env` names).
fn shared_server(store: impl FnOnce() -> String, env: &'static str) -> String {
    static SERVER: OnceLock<(ServerProcess, String)> = OnceLock::new();
    if let Ok(url) = std::env::var(env) {
        return url;
    }
    SERVER.get_or_init(|| launch(&store())).1.clone()
}

impl ThroughServer {
    /// Through a server on the store `store()` names.
    pub fn new(store: impl FnOnce() -> String, env: &'static str) -> ThroughServer {
        ThroughServer {
            url: shared_server(store, env),
            env,
        }
    }

    async fn store(&self, url: &str) -> ServerStore {
        ServerStore::connect(url.to_owned())
            .await
            .unwrap_or_else(|e| panic!("connect to workerid-server at {url}: {e}"))
    }
}

#[async_trait]
impl StoreFactory for ThroughServer {
    async fn connect(&self) -> Arc<dyn LeaseStore> {
        Arc::new(self.store(&self.url).await)
    }

    async fn unreachable(&self) -> Option<Arc<dyn LeaseStore>> {
        let (relay, url) = workerid_testkit::relay::Relay::in_front_of(&self.url);
        let store = self.store(&url).await;
        relay.stop();
        Some(Arc::new(store))
    }

    fn share_with_children(&self) -> Option<Vec<(String, String)>> {
        Some(vec![(self.env.to_string(), self.url.clone())])
    }
}

#[async_trait]
impl SegmentFactory for ThroughServer {
    async fn connect(&self) -> Arc<dyn SegmentStore> {
        Arc::new(self.store(&self.url).await)
    }
}
