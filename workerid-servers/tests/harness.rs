//! The harness itself: each server starts, answers, restarts, and is gone
//! (process and directory) once dropped.

use std::path::PathBuf;

use workerid_servers::mariadb::MariaDbServer;
use workerid_servers::postgres::PostgresServer;
use workerid_servers::redis::{RedisConfig, RedisServer};
use workerid_servers::ServerProcess;

fn exercise(process: &ServerProcess) -> (u32, PathBuf) {
    assert!(process.is_running());
    process.restart();
    assert!(process.is_running(), "restarted");
    process.kill();
    assert!(!process.is_running(), "killed");
    process.start();
    let pid = process.pid().expect("running again");
    (pid, process.dir().to_path_buf())
}

fn assert_gone((pid, dir): (u32, PathBuf)) {
    // SAFETY: signal 0 only checks whether the process exists.
    let alive = unsafe { libc_kill(pid as i32, 0) } == 0;
    assert!(!alive, "process {pid} outlived its handle");
    assert!(!dir.exists(), "{} outlived its handle", dir.display());
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

#[test]
fn redis_starts_restarts_and_cleans_up() {
    let server = RedisServer::start(RedisConfig {
        persistence: true,
        cluster_node: false,
    });
    let left = exercise(server.process());
    drop(server);
    assert_gone(left);
}

#[test]
fn postgres_starts_restarts_and_cleans_up() {
    let server = PostgresServer::start();
    let left = exercise(server.process());
    drop(server);
    assert_gone(left);
}

#[test]
fn mariadb_starts_restarts_and_cleans_up() {
    let server = MariaDbServer::start();
    let left = exercise(server.process());
    drop(server);
    assert_gone(left);
}
