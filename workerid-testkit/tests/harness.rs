//! The harness itself: each server starts, answers, restarts, and is gone
//! (process and directory) once dropped.

use std::path::PathBuf;
use std::time::Duration;

use workerid_testkit::etcd::{EtcdCluster, EtcdServer};
use workerid_testkit::mariadb::MariaDbServer;
use workerid_testkit::postgres::PostgresServer;
use workerid_testkit::redis::{RedisConfig, RedisServer};
use workerid_testkit::ServerProcess;

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
        ..RedisConfig::default()
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

#[test]
fn etcd_starts_restarts_and_cleans_up() {
    let server = EtcdServer::start();
    let left = exercise(server.process());
    drop(server);
    assert_gone(left);
}

#[test]
fn an_etcd_cluster_elects_a_new_leader_and_takes_a_member_back() {
    let cluster = EtcdCluster::start();
    let leader = cluster.leader().expect("a leader").name().to_string();
    let old = cluster
        .nodes()
        .iter()
        .find(|n| n.name() == leader)
        .expect("the leader is a member");
    old.process().kill();
    cluster.wait_healthy(Duration::from_secs(30));
    let new = cluster.leader().expect("a new leader");
    assert_ne!(new.name(), leader, "a killed member cannot lead");
    old.process().start();
    cluster.wait_healthy(Duration::from_secs(30));
    assert!(cluster.nodes().iter().all(|n| n.healthy()));
    let dirs: Vec<PathBuf> = cluster
        .nodes()
        .iter()
        .map(|n| n.process().dir().to_path_buf())
        .collect();
    drop(cluster);
    assert!(dirs.iter().all(|d| !d.exists()));
}
