//! Options of a [`SqlStore`], and connecting with them.

use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::AnyPool;
use workerid_core::{redact_url, Error, Result};

use crate::dialect::check_table;
use crate::store::{q, SqlStore, DEFAULT_SEGMENTS_TABLE, DEFAULT_TABLE};

/// Options of a [`SqlStore`]; made by [`SqlStore::builder`].
#[derive(Debug, Clone)]
pub struct SqlStoreBuilder {
    table: String,
    segments_table: String,
    /// None: [`DEFAULT_MAX_CONNECTIONS`], or one for SQLite.
    max_connections: Option<u32>,
    acquire_timeout: Duration,
    tcp_user_timeout: Duration,
    create_tables: bool,
    segment_versions: bool,
}

/// The pool size for a server database when none is set.
const DEFAULT_MAX_CONNECTIONS: u32 = 10;

impl Default for SqlStoreBuilder {
    fn default() -> Self {
        SqlStoreBuilder {
            table: DEFAULT_TABLE.to_string(),
            segments_table: DEFAULT_SEGMENTS_TABLE.to_string(),
            max_connections: None,
            acquire_timeout: Duration::from_secs(5),
            tcp_user_timeout: Duration::from_secs(2),
            create_tables: true,
            segment_versions: true,
        }
    }
}

impl SqlStoreBuilder {
    /// The lease table (default `workerid_leases`; the namespace table is
    /// `<table>_namespaces`): 1 to 48 bytes of `[A-Za-z_][A-Za-z0-9_]*`.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// The segment table (default `segments`, go-id-alloc's name; Leaf's is
    /// `leaf_alloc`). A table their servers created serves as it is: this
    /// store only adds a `version` column to it (see
    /// [`segment_versions`](Self::segment_versions)).
    pub fn segments_table(mut self, table: impl Into<String>) -> Self {
        self.segments_table = table.into();
        self
    }

    /// Whether the segment table keeps a `version` column that every
    /// reservation bumps (default true), so that unused IDs can be given
    /// back on shutdown without ever being handed out twice. A table
    /// without it gets it when the store connects, with a logged warning
    /// that names the statement. With false the table stays exactly as it
    /// is and nothing is ever given back: unused IDs are skipped, never
    /// reused.
    pub fn segment_versions(mut self, versions: bool) -> Self {
        self.segment_versions = versions;
        self
    }

    /// The pool's largest number of connections (default 10; for SQLite 1).
    ///
    /// SQLite lets one connection write at a time, and a connection that
    /// finds the file locked sleeps in growing steps (1 ms, 2 ms, 5 ms, ...)
    /// before it tries again, so writers of one process on several
    /// connections mostly wait on each other's locks: with the default of
    /// one, they queue in the pool instead. Renewals and releases queue in
    /// the store handle and commit together, whatever the pool size.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = Some(max);
        self
    }

    /// Whether to create the tables (and MySQL's acquire procedure) when
    /// they are missing (default true). With false, nothing is ever
    /// written on connecting (SQLite's WAL switch included), and a database
    /// with neither the lease tables nor the segment table (or none the
    /// user may read) is refused as "not initialised": what a read-only
    /// tool pointed at a mistyped database wants. One of the two is enough,
    /// so a user granted only a segment table (Leaf's) can list its tags.
    pub fn create_tables(mut self, create: bool) -> Self {
        self.create_tables = create;
        self
    }

    /// How long to wait for a connection from the pool (default 5 s); past
    /// it, `Unavailable`.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// How long data sent to the database may stay unacknowledged before
    /// its connection is given up (default 2 s; Linux's
    /// `TCP_USER_TIMEOUT`, set on the pool's connections). A request stuck
    /// on a broken link then ends with its connection, rather than being
    /// delivered minutes later when the link heals, and a pool slot is not
    /// held by a connection that cannot answer. Not applied to a pool
    /// passed to [`from_pool`](Self::from_pool).
    pub fn tcp_user_timeout(mut self, timeout: Duration) -> Self {
        self.tcp_user_timeout = timeout;
        self
    }

    /// Connects to `url` (`postgres://`, `mysql://`, `mariadb://` or
    /// `sqlite://`) and creates the tables if they are missing.
    ///
    /// TLS is set in the URL, as sqlx reads it (with the feature
    /// `tls-rustls`, on by default): PostgreSQL's `sslmode=require`,
    /// `verify-ca` or `verify-full` with `sslrootcert=`, `sslcert=` and
    /// `sslkey=`; MySQL's `ssl-mode=REQUIRED`, `VERIFY_CA` or
    /// `VERIFY_IDENTITY` with `ssl-ca=`, `ssl-cert=` and `ssl-key=`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad URL or table name;
    /// [`Error::Unavailable`] when the database cannot be reached or its
    /// certificate is refused.
    pub async fn connect(self, url: &str) -> Result<SqlStore> {
        check_table(&self.table)?;
        check_table(&self.segments_table)?;
        sqlx::any::install_default_drivers();
        let url = url.replacen("mariadb://", "mysql://", 1);
        let in_memory = in_memory(&url);
        let sqlite = url.starts_with("sqlite:");
        let max_connections =
            self.max_connections
                .unwrap_or(if sqlite { 1 } else { DEFAULT_MAX_CONNECTIONS });
        let peers = std::sync::Arc::new(crate::socket::database_addresses(&url).await);
        let user_timeout = self.tcp_user_timeout;
        let mut options = AnyPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(self.acquire_timeout)
            // No idle or lifetime reaping: sqlx 0.9.0's reaper task reads the
            // idle count while a release and an acquire race on it, can read
            // it wrapped below zero, and then loops without ever yielding,
            // freezing the runtime it runs on.
            .idle_timeout(None)
            .max_lifetime(None)
            // sqlx pings a connection when it goes back to the pool (which
            // drops a broken one) and, by default, again before handing it
            // out: a second round trip on every operation's path. A
            // connection that broke while idle fails its next statement
            // instead, with `Unavailable` (retryable), and is dropped.
            .test_before_acquire(false)
            .after_connect(move |conn, _| {
                if !peers.is_empty() {
                    crate::socket::set_user_timeout(&peers, user_timeout);
                }
                Box::pin(async move {
                    // MySQL's REPEATABLE READ takes next-key locks on rows an
                    // UPDATE only scans: under load, renewals in one namespace
                    // deadlock. READ COMMITTED locks only the rows it changes.
                    if conn.backend_name() == "MySQL" {
                        q("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(())
                })
            });
        if in_memory {
            // Each connection to an in-memory SQLite database is a database of
            // its own: keep exactly one, for ever.
            options = options.max_connections(1).min_connections(1);
        } else if sqlite {
            create_private_sqlite_file(&url);
        }
        let pool = match options.connect(&url).await {
            Ok(pool) => pool,
            // The pool says only that it timed out: one connection of our
            // own tells why (refused, wrong password, no such database...).
            Err(sqlx::Error::PoolTimedOut) => {
                // A refusal answers at once; a server that keeps silent
                // has had its chance already.
                let cause = tokio::time::timeout(
                    self.acquire_timeout.min(Duration::from_secs(1)),
                    <sqlx::AnyConnection as sqlx::Connection>::connect(&url),
                )
                .await;
                return Err(match cause {
                    Ok(Err(e)) => Error::unavailable("sql", e),
                    _ => Error::unavailable(
                        "sql",
                        format!(
                            "no connection within {:?}: the server does not answer, or is not \
                             this kind of database",
                            self.acquire_timeout
                        ),
                    ),
                });
            }
            Err(e @ sqlx::Error::Configuration(_)) => {
                return Err(Error::invalid_config(format!(
                    "bad database URL {:?}: {e}",
                    redact_url(&url)
                )))
            }
            Err(e) => return Err(Error::unavailable("sql", e)),
        };
        self.from_pool(pool).await
    }

    /// Uses an existing pool (its URL scheme tells the database) and creates
    /// the tables if they are missing. Prefer a pool with `idle_timeout(None)`,
    /// `max_lifetime(None)` and `test_before_acquire(false)` (no ping round
    /// trip before every operation), as [`SqlStoreBuilder::connect`] makes: sqlx
    /// 0.9.0's idle and lifetime reaper can read its idle count below zero
    /// when an acquire and a release race, and then loop without yielding.
    ///
    /// # Errors
    /// As [`SqlStoreBuilder::connect`].
    pub async fn from_pool(self, pool: AnyPool) -> Result<SqlStore> {
        check_table(&self.table)?;
        check_table(&self.segments_table)?;
        let url = pool.connect_options().database_url.to_string();
        let durable = !in_memory(&url);
        SqlStore::open(
            pool,
            &self.table,
            &self.segments_table,
            durable,
            self.create_tables,
            self.segment_versions,
        )
        .await
    }
}

/// Creates the file a `sqlite:` URL with `mode=rwc` names, when it does
/// not exist yet, readable and writable by its owner only: it holds the
/// lease tokens. SQLite gives its `-wal` and `-shm` files the database
/// file's permissions. A file that cannot be made is left to SQLite, whose
/// error names the cause as the store's other refusals do.
fn create_private_sqlite_file(url: &str) {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let creates = query.split('&').any(|pair| pair == "mode=rwc");
    if !creates || path.is_empty() {
        return;
    }
    let path = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    if let Err(e) = open.open(path.as_ref()) {
        tracing::debug!("the SQLite file was not made ahead of SQLite: {e}");
    }
}

/// Whether `url` names an in-memory SQLite database (gone with its last
/// connection).
fn in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}
