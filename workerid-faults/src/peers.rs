//! go-id-alloc's and Leaf's servers, modelled, on the service run's table:
//! each peer runs their core SQL (in one transaction, `UPDATE t SET max_id =
//! max_id + step WHERE biz_tag = ?`, then `SELECT max_id, step`) and hands
//! out `[max_id - step, max_id)` without ID 0, as they do, recording every
//! ID in the run's history beside what the `workerid-server`s answered.
//! The table is created first exactly as their READMEs and scripts create
//! it, so the servers must take it as it is.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, AssertSqlSafe, Row};

use crate::clock::mono_ns;
use crate::service_check::{Endpoint, Received};
use crate::service_clients::{thread_runtime, Shared};
use crate::{FaultsError, Result};

/// Whose table the run shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerTable {
    /// go-id-alloc's `segments`, as its README creates it (rows at 0).
    GoIdAlloc,
    /// Leaf's `leaf_alloc`, as its `scripts/leaf_alloc.sql` creates it
    /// (rows at 1, `step int`, `update_time timestamp`).
    Leaf,
}

/// The range rule a peer serves by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerRule {
    /// go-id-alloc's and Leaf's: `[max_id - step, max_id)`.
    Theirs,
    /// The checker's teeth: `(max_id - step, max_id]`, the rule of a server
    /// that reads `max_id` as the last ID handed out; beside servers of the
    /// other rule, the boundary ID of a range goes out twice.
    LastHandedOut,
}

/// When the peers and the servers serve in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Migration {
    /// Both, all the run long (a rolling migration caught midway).
    Alongside,
    /// The peers alone for the first third, both for the second, the
    /// servers alone for the last (migrating to workerid-server).
    TheirsThenOurs,
    /// The servers alone, then both, then the peers alone: the servers stop
    /// with SIGTERM and give their tails back (a rollback).
    OursThenTheirs,
}

/// The peers of a service run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    /// How many peer servers.
    pub count: usize,
    /// Whose table, created as they create it.
    pub table: PeerTable,
    /// Their range rule.
    pub rule: PeerRule,
    /// Who serves when.
    pub migration: Migration,
}

impl Peers {
    /// Two peers of go-id-alloc's rule on its own table, all the run long.
    pub fn go_id_alloc() -> Peers {
        Peers {
            count: 2,
            table: PeerTable::GoIdAlloc,
            rule: PeerRule::Theirs,
            migration: Migration::Alongside,
        }
    }

    /// The name of the shared table for a run of `seed`.
    pub(crate) fn table_name(&self, seed: u64) -> String {
        let base = match self.table {
            PeerTable::GoIdAlloc => "segments",
            PeerTable::Leaf => "leaf_alloc",
        };
        format!("{base}_{}", seed % 1_000_000_007)
    }
}

/// Whether `url` names MySQL or MariaDB (else PostgreSQL).
fn is_mysql(url: &str) -> bool {
    url.starts_with("mysql:") || url.starts_with("mariadb:")
}

/// Creates `table` for `peers` on the database at `url`, exactly as their
/// README or script does (PostgreSQL: the same columns in its types), with
/// one row per tag of step `step`.
///
/// # Errors
/// [`FaultsError::Config`] for a store that is not PostgreSQL, MySQL or
/// MariaDB, or when the database refuses.
pub(crate) async fn create_table(
    url: &str,
    peers: &Peers,
    table: &str,
    tags: &[String],
    step: u64,
) -> Result<()> {
    if !(is_mysql(url) || url.starts_with("postgres")) {
        return Err(FaultsError::Config(
            "go-id-alloc and Leaf run on MySQL, MariaDB or PostgreSQL only".into(),
        ));
    }
    let mysql = is_mysql(url);
    let create = match (peers.table, mysql) {
        (PeerTable::GoIdAlloc, true) => format!(
            "CREATE TABLE `{table}` (\n `biz_tag` varchar(32) NOT NULL,\n \
             `max_id` bigint NOT NULL,\n `step` bigint NOT NULL,\n \
             `description` varchar(1024) DEFAULT '' NOT NULL,\n \
             `update_time` datetime DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n \
             PRIMARY KEY (`biz_tag`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8"
        ),
        (PeerTable::GoIdAlloc, false) => format!(
            "CREATE TABLE {table} (biz_tag varchar(32) NOT NULL, max_id bigint NOT NULL, \
             step bigint NOT NULL, description varchar(1024) DEFAULT '' NOT NULL, \
             update_time timestamp DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag))"
        ),
        (PeerTable::Leaf, true) => format!(
            "CREATE TABLE `{table}` (\n  `biz_tag` varchar(128)  NOT NULL DEFAULT '',\n  \
             `max_id` bigint(20) NOT NULL DEFAULT '1',\n  `step` int(11) NOT NULL,\n  \
             `description` varchar(256)  DEFAULT NULL,\n  \
             `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n  \
             PRIMARY KEY (`biz_tag`)\n) ENGINE=InnoDB"
        ),
        (PeerTable::Leaf, false) => format!(
            "CREATE TABLE {table} (biz_tag varchar(128) NOT NULL DEFAULT '', \
             max_id bigint NOT NULL DEFAULT 1, step int NOT NULL, \
             description varchar(256) DEFAULT NULL, \
             update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag))"
        ),
    };
    let first = match peers.table {
        PeerTable::GoIdAlloc => 0,
        PeerTable::Leaf => 1,
    };
    let pool = connect(url).await?;
    let fail = |e: sqlx::Error| FaultsError::Config(format!("creating {table}: {e}"));
    sqlx::query(AssertSqlSafe(create))
        .execute(&pool)
        .await
        .map_err(fail)?;
    for tag in tags {
        let insert = format!(
            "INSERT INTO {table} (biz_tag, max_id, step, description) \
             VALUES ('{tag}', {first}, {step}, '{tag} IDs')"
        );
        sqlx::query(AssertSqlSafe(insert))
            .execute(&pool)
            .await
            .map_err(fail)?;
    }
    pool.close().await;
    Ok(())
}

async fn connect(url: &str) -> Result<AnyPool> {
    sqlx::any::install_default_drivers();
    let url = url.replacen("mariadb://", "mysql://", 1);
    AnyPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(2))
        .connect(&url)
        .await
        .map_err(|e| FaultsError::Config(format!("a peer cannot connect: {e}")))
}

/// One peer, recorded as server `server`, until the run stops or
/// `serving` says it stops: reserves a range of each tag in turn and hands
/// all of it out.
///
/// A Leaf peer (`dynamic`) reserves every other range of a tag with
/// Leaf's custom-step statement, twice the row's step, as Leaf's dynamic
/// step does once segments go fast.
#[allow(clippy::too_many_arguments)]
pub(crate) fn serve_as_peer(
    shared: &Shared,
    server: usize,
    url: &str,
    table: &str,
    rule: PeerRule,
    dynamic: bool,
    tags: &[String],
    serving: impl Fn() -> bool,
) {
    let Some(runtime) = thread_runtime("a peer") else {
        return;
    };
    runtime.block_on(async {
        let mut pool = None;
        let mut turn = 0usize;
        // Each tag's row step, once a reservation read it.
        let mut row_steps = std::collections::HashMap::<String, u64>::new();
        while !shared.stop.load(Ordering::Relaxed) {
            if !serving() {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            if pool.is_none() {
                pool = connect(url).await.ok();
            }
            let Some(db) = pool.as_ref() else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let tag = &tags[turn % tags.len()];
            let custom = row_steps
                .get(tag)
                .filter(|_| dynamic && (turn / tags.len()) % 2 == 1)
                .map(|step| step * 2);
            turn += 1;
            let sent = mono_ns();
            let reserved = tokio::time::timeout(
                Duration::from_secs(2),
                reserve(db, is_mysql(url), table, tag, custom),
            )
            .await;
            let (max_id, step) = match reserved {
                Ok(Ok((max_id, row_step))) => {
                    row_steps.insert(tag.clone(), row_step);
                    (max_id, custom.unwrap_or(row_step))
                }
                Ok(Err(e)) => {
                    tracing::debug!("peer s{server}: {e}");
                    shared.fail("peer: store error".into());
                    pool = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(_) => {
                    shared.fail("peer: no answer".into());
                    pool = None;
                    continue;
                }
            };
            let received = mono_ns();
            let ids = match rule {
                PeerRule::Theirs => max_id.saturating_sub(step)..max_id,
                PeerRule::LastHandedOut => max_id.saturating_sub(step) + 1..max_id + 1,
            };
            let handed = {
                let mut history = shared.lock_ids();
                let before = history.len();
                history.extend(ids.filter(|&id| id != 0).map(|id| Received {
                    server,
                    endpoint: Endpoint::Peer,
                    tag: tag.clone(),
                    id,
                    sent,
                    received,
                }));
                (history.len() - before) as u64
            };
            shared.acknowledged.fetch_add(handed, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
}

/// go-id-alloc's and Leaf's core SQL: the update and the read of the new
/// row in one transaction; with `custom`, Leaf's custom-step update
/// (`updateMaxIdByCustomStepAndGetLeafAlloc`) by that many. Returns
/// `max_id` and the row's `step` after it.
async fn reserve(
    db: &AnyPool,
    mysql: bool,
    table: &str,
    tag: &str,
    custom: Option<u64>,
) -> std::result::Result<(u64, u64), sqlx::Error> {
    let mut tx = db.begin().await?;
    let by = custom.map_or_else(|| "step".to_owned(), |step| step.to_string());
    let update = format!("UPDATE {table} SET max_id = max_id + {by} WHERE biz_tag = '{tag}'");
    sqlx::query(AssertSqlSafe(update)).execute(&mut *tx).await?;
    // `step` is an int column in Leaf's table: read as a 64-bit integer.
    let int = if mysql { "SIGNED" } else { "BIGINT" };
    let select = format!(
        "SELECT CAST(max_id AS {int}), CAST(step AS {int}) FROM {table} WHERE biz_tag = '{tag}'"
    );
    let row = sqlx::query(AssertSqlSafe(select))
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    let number = |i: usize| -> std::result::Result<u64, sqlx::Error> {
        let n: i64 = row.try_get(i)?;
        u64::try_from(n).map_err(|e| sqlx::Error::Decode(Box::new(e)))
    };
    Ok((number(0)?, number(1)?))
}
