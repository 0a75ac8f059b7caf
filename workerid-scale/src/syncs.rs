//! Disk syncs, as the store's servers count them: what a durable renewal
//! costs the disk, a figure that does not change with the machine's CPU.
//!
//! - etcd: WAL fsyncs plus backend commits (each ends in an fsync), from
//!   every member's `/metrics`;
//! - PostgreSQL: `pg_stat_wal.wal_sync`;
//! - MariaDB: `Innodb_os_log_fsyncs` plus `Innodb_data_fsyncs`.
//!
//! Redis has no such counter and SQLite runs in this process: they are not
//! counted. The memory store has no disk: none.

use std::time::Duration;

use sqlx::{Connection, Row};
use workerid_testkit::etcd::EtcdNode;
use workerid_testkit::{RunningStore, Servers};

/// How long one reading may take before it is given up (the figure is then
/// missing, never wrong).
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The disk syncs the store's servers have counted since they started, or
/// None when the store keeps no count or a reading failed.
pub async fn read(running: &RunningStore) -> Option<u64> {
    tokio::time::timeout(READ_TIMEOUT, count(running))
        .await
        .ok()
        .flatten()
}

async fn count(running: &RunningStore) -> Option<u64> {
    match running.servers() {
        Servers::Etcd(node) => etcd(std::slice::from_ref(node.node())),
        Servers::EtcdCluster(cluster) => etcd(cluster.nodes()),
        Servers::Postgres(_) => {
            let mut db = sqlx::PgConnection::connect(&running.url()).await.ok()?;
            let row = sqlx::query("SELECT wal_sync FROM pg_stat_wal")
                .fetch_one(&mut db)
                .await
                .ok()?;
            u64::try_from(row.try_get::<i64, _>(0).ok()?).ok()
        }
        Servers::MariaDb(_) => {
            let mut db = sqlx::MySqlConnection::connect(&running.url()).await.ok()?;
            let rows = sqlx::query(
                "SHOW GLOBAL STATUS WHERE Variable_name IN \
                 ('Innodb_os_log_fsyncs', 'Innodb_data_fsyncs')",
            )
            .fetch_all(&mut db)
            .await
            .ok()?;
            let mut total = 0u64;
            for row in rows {
                let value: String = row.try_get(1).ok()?;
                total += value.parse::<u64>().ok()?;
            }
            Some(total)
        }
        // The memory store has no disk.
        Servers::None => Some(0),
        Servers::SqliteFile(_) | Servers::Redis(_) | Servers::RedisCluster(_) => None,
    }
}

/// The metrics whose counts are disk syncs on an etcd member.
const ETCD_SYNC_METRICS: [&str; 2] = [
    "etcd_disk_wal_fsync_duration_seconds_count",
    "etcd_disk_backend_commit_duration_seconds_count",
];

/// The sum over `members` of their sync counts. The testkit's probe is a
/// short blocking read, kept off the runtime's other tasks.
fn etcd(members: &[EtcdNode]) -> Option<u64> {
    tokio::task::block_in_place(|| {
        members.iter().try_fold(0, |total, member| {
            Some(total + etcd_syncs(&member.metrics()?)?)
        })
    })
}

/// The sum of the sync counts in a Prometheus text exposition; None if one
/// is missing.
fn etcd_syncs(text: &str) -> Option<u64> {
    ETCD_SYNC_METRICS.iter().try_fold(0u64, |sum, name| {
        let value = text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?;
            rest.strip_prefix(' ')?.trim().parse::<f64>().ok()
        })?;
        Some(sum + value as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_counts_are_summed_and_both_are_needed() {
        let text = "# HELP etcd_disk_wal_fsync_duration_seconds The latency\n\
                    etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 7\n\
                    etcd_disk_wal_fsync_duration_seconds_sum 0.25\n\
                    etcd_disk_wal_fsync_duration_seconds_count 120\n\
                    etcd_disk_backend_commit_duration_seconds_count 3e+01\n";
        assert_eq!(etcd_syncs(text), Some(150));
        let partial = "etcd_disk_wal_fsync_duration_seconds_count 120\n";
        assert_eq!(etcd_syncs(partial), None);
    }
}
