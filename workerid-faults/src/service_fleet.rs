//! The fleet of a service run: the `workerid-server` program, and each
//! server as a [`ServerProcess`] (its own process group, so a kill or a
//! freeze reaches all of it; started again on the same port and config).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use workerid_testkit::{free_port, ServerProcess, ServerSpec};

use crate::http::HttpClient;
use crate::network::Labs;
use crate::service::ServiceConfig;
use crate::{io_error, FaultsError, Result};

/// The `workerid-server` program: `WORKERID_SERVER_BIN` if set; else, when
/// run under cargo (`CARGO` set), built first with `cargo build -p
/// workerid-server` in the profile of the running program so it is never
/// stale; else the one next to the running program in the target directory.
///
/// # Errors
/// [`FaultsError::Config`] when the build fails or the program is missing.
pub fn server_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("WORKERID_SERVER_BIN") {
        // Absolute: each server runs in a directory of its own.
        let path = PathBuf::from(path);
        return std::fs::canonicalize(&path).map_err(|e| {
            FaultsError::Config(format!("WORKERID_SERVER_BIN={}: {e}", path.display()))
        });
    }
    let exe = std::env::current_exe().map_err(io_error("the running program"))?;
    // target/<profile>/deps/<test> or target/<profile>/<binary>.
    let mut dir = exe
        .parent()
        .ok_or_else(|| FaultsError::Config("the running program has no directory".into()))?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent().unwrap_or(dir);
    }
    let program = dir.join("workerid-server");
    if let Some(cargo) = std::env::var_os("CARGO") {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
        let mut command = std::process::Command::new(cargo);
        // What cargo sets for the running test (its package's variables,
        // the library path) would mark the server's dependencies dirty and
        // rebuild them on every run.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("CARGO_PKG_")
                || key.starts_with("CARGO_MANIFEST_")
                || key.starts_with("CARGO_BIN_")
                || matches!(
                    key.as_ref(),
                    "CARGO_CRATE_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "LD_LIBRARY_PATH"
                )
            {
                command.env_remove(key.as_ref());
            }
        }
        command.args([
            "build",
            "-q",
            "-p",
            "workerid-server",
            "--manifest-path",
            manifest,
        ]);
        if dir.file_name().is_some_and(|n| n == "release") {
            command.arg("--release");
        }
        let out = command.output().map_err(io_error("cargo"))?;
        if !out.status.success() {
            return Err(FaultsError::Config(format!(
                "cargo build -p workerid-server failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
    }
    if program.is_file() {
        Ok(program)
    } else {
        Err(FaultsError::Config(format!(
            "no {}: run `cargo build -p workerid-server` first, or set WORKERID_SERVER_BIN",
            program.display()
        )))
    }
}

/// One server of the fleet.
pub(crate) struct Server {
    pub process: ServerProcess,
}

/// Starts server `i` on `store_url` and waits until it answers `/livez`;
/// returns it and the address it serves at. In a network run (`labs`) it
/// runs in lab `i`, reaching the store at that lab's URL.
pub(crate) fn launch(
    config: &ServiceConfig,
    dir: &std::path::Path,
    i: usize,
    url: &str,
    labs: Option<&Labs>,
) -> Result<(Server, SocketAddr, SocketAddr)> {
    let (port, grpc_port) = (free_port(), free_port());
    let (ip, url) = match labs {
        Some(labs) => (labs.address(i), labs.translate(i, url)),
        None => (std::net::Ipv4Addr::LOCALHOST, url.to_string()),
    };
    let (address, grpc) = (
        SocketAddr::from((ip, port)),
        SocketAddr::from((ip, grpc_port)),
    );
    let mut toml = String::new();
    for tag in &config.tags {
        toml.push_str(&format!(
            "[[tags]]\nname = \"{tag}\"\nfirst_id = 1\nstep = {}\n",
            config.step
        ));
    }
    let path = dir.join(format!("s{i}.toml"));
    std::fs::write(&path, toml).map_err(io_error(&path))?;
    let max_worker_id = if config.unsafe_shared_worker_id {
        0
    } else {
        config.max_worker_id
    };
    // Flags rather than the file: they win over any WORKERID_* variable of
    // the environment the suite runs in.
    let pairs = [
        ("--config", path.display().to_string()),
        ("--store", url),
        ("--listen", address.to_string()),
        ("--grpc-listen", grpc.to_string()),
        ("--workers", "2".to_string()),
        ("--store-timeout-ms", "1000".to_string()),
        ("--tags-refresh-ms", "1000".to_string()),
        ("--snowflake-namespace", config.namespace(i)),
        ("--snowflake-ttl-secs", config.ttl.as_secs().to_string()),
        ("--snowflake-max-worker-id", max_worker_id.to_string()),
    ];
    let bin = config.server_bin.clone();
    // `ip netns exec` runs the server itself in the namespace (no process
    // of its own in between), so signals reach the server.
    let inside = labs.map(|labs| {
        let (ip, args) = labs.exec_prefix(i);
        (ip.to_path_buf(), args.map(String::from))
    });
    let process = ServerProcess::launch(&format!("server-s{i}"), move |_| {
        let spec = match &inside {
            Some((ip, args)) => ServerSpec::new(ip)
                .args(args.iter().map(String::as_str))
                .args([bin.as_os_str()]),
            None => ServerSpec::new(bin),
        };
        spec.arg_pairs(&pairs)
            .ready(move || {
                HttpClient::at(address, Duration::from_millis(500))
                    .get("/livez")
                    .is_ok_and(|a| a.status == 200)
            })
            .ready_timeout(Duration::from_secs(60))
    });
    Ok((Server { process }, address, grpc))
}
