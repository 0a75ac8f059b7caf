//! The store: connecting, and the three operations (the schema is in `schema.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::any::AnyRow;
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool, AssertSqlSafe, Row};
use workerid_core::{
    Capabilities, Error, Grant, Holder, LeaseStore, Listing, Namespace, Result, Token, WorkerId,
};

use crate::builder::SqlStoreBuilder;
use crate::dialect::{Dialect, Statements};
use crate::group_commit::GroupCommit;
use crate::segments::SegmentStatements;

/// The default table name (the namespace table adds `_namespaces`).
pub const DEFAULT_TABLE: &str = "workerid_leases";

/// The default segment table (Leaf's `segments`).
pub const DEFAULT_SEGMENTS_TABLE: &str = "segments";

/// u64 watermarks live in signed BIGINT columns with the top bit flipped,
/// which keeps their order, so `GREATEST` works.
pub(crate) fn watermark_to_sql(watermark: u64) -> i64 {
    (watermark ^ (1 << 63)) as i64
}

pub(crate) fn watermark_from_sql(stored: i64) -> u64 {
    (stored as u64) ^ (1 << 63)
}

fn micros(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX)
}

/// A lease store on a SQL database. Cheap to clone: clones share the pool.
///
/// Capabilities: 1 ms minimum ttl and granularity, 22 worker bits, durable
/// (except an in-memory SQLite database), lists and force-releases.
#[derive(Debug, Clone)]
pub struct SqlStore {
    pool: AnyPool,
    dialect: Dialect,
    sql: Arc<Statements>,
    segments: Arc<SegmentStatements>,
    durable: bool,
    /// A SQLite file's renewals and releases share write transactions (one
    /// WAL sync each); the server databases group commit themselves.
    group_commit: Option<Arc<GroupCommit>>,
    /// How many segment rows the last listing skipped, so that a warning
    /// says it once rather than at every listing.
    skipped_rows: Arc<AtomicUsize>,
}

pub(crate) fn q(sql: &str) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
    // Every statement is built from a validated table name; values are bound.
    sqlx::query(AssertSqlSafe(sql.to_string()))
}

impl SqlStore {
    /// Options: table name, pool size, timeouts; then connect.
    pub fn builder() -> SqlStoreBuilder {
        SqlStoreBuilder::default()
    }

    /// Connects to `url` with the default options and creates the tables if
    /// they are missing.
    ///
    /// # Errors
    /// As [`SqlStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder().connect(url).await
    }

    /// The database this store talks to.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The pool.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub(crate) fn statements(&self) -> &Statements {
        &self.sql
    }

    pub(crate) fn segments(&self) -> &SegmentStatements {
        &self.segments
    }

    /// Says in a warning that `skipped` segment rows (the first named
    /// `first`) cannot be served, when that number changed since the last
    /// listing.
    pub(crate) fn skipped_rows(&self, skipped: usize, first: Option<&str>) {
        let before = self.skipped_rows.swap(skipped, Ordering::Relaxed);
        if skipped != 0 && skipped != before {
            let first: String = first.unwrap_or_default().chars().take(64).collect();
            tracing::warn!(
                skipped,
                "{skipped} segment row(s) are not served: a tag is 1 to 32 bytes of \
                 [A-Za-z0-9._:-] (the first skipped: {first:?})"
            );
        }
    }

    pub(crate) async fn open(
        pool: AnyPool,
        table: &str,
        segments_table: &str,
        durable: bool,
        create_tables: bool,
        segment_versions: bool,
    ) -> Result<SqlStore> {
        let backend = pool
            .acquire()
            .await
            .map_err(|e| Error::unavailable("sql", e))?
            .backend_name()
            .to_string();
        let dialect = Dialect::from_backend(&backend)?;
        let store = SqlStore {
            sql: Arc::new(Statements::new(dialect, table)),
            segments: Arc::new(SegmentStatements::new(
                dialect,
                segments_table,
                segment_versions,
            )),
            pool,
            dialect,
            durable,
            // An in-memory database has no sync to share, and a connection
            // the batch would close on failure would take its data along.
            group_commit: (dialect == Dialect::Sqlite && durable).then(Arc::default),
            skipped_rows: Arc::default(),
        };
        let mut store = store;
        // A read-only open runs no migration, so it cannot know that the
        // acquire routine exists: acquire then runs statement by statement.
        let routine_made = if create_tables {
            store.migrate().await?
        } else {
            // Leases or segments: a user granted only the segment table
            // (Leaf's, say) can still read it.
            let leases = store
                .check_tables(&[table.to_string(), format!("{table}_namespaces")])
                .await;
            let segments = store.check_tables(&[segments_table.to_string()]).await;
            if segments.is_err() {
                leases?;
            }
            false
        };
        if !routine_made {
            let mut sql = Statements::new(dialect, table);
            sql.acquire_call = None;
            store.sql = Arc::new(sql);
        }
        Ok(store)
    }

    pub(crate) fn store_name(&self) -> &'static str {
        match self.dialect {
            Dialect::Postgres => "postgres",
            Dialect::MySql => "mysql",
            Dialect::Sqlite => "sqlite",
        }
    }

    pub(crate) fn unavailable(&self, e: impl Into<workerid_core::BoxError>) -> Error {
        Error::unavailable(self.store_name(), e)
    }

    /// The acquire transaction. The outer error is the database's; the inner
    /// one the contract's answer (after which the transaction rolled back).
    async fn acquire_tx(
        &self,
        namespace: &str,
        max_worker_id: u32,
        who: (&str, &str),
        ttl_us: i64,
    ) -> sqlx::Result<Result<Grant>> {
        let mut conn = self.connection_for_transaction().await?;
        let answer = self
            .acquire_on(&mut conn, namespace, max_worker_id, who, ttl_us)
            .await;
        self.after_transaction(&mut conn, answer.is_ok());
        answer
    }

    async fn acquire_on(
        &self,
        conn: &mut PoolConnection<Any>,
        namespace: &str,
        max_worker_id: u32,
        (token, holder): (&str, &str),
        ttl_us: i64,
    ) -> sqlx::Result<Result<Grant>> {
        let s = &self.sql;
        let max = i64::from(max_worker_id);
        let mut tx = self.begin_write(conn).await?;
        let upsert = q(&s.upsert_namespace).bind(namespace.to_string()).bind(max);
        let row: AnyRow = match &s.lock_namespace {
            Some(lock) => {
                upsert.execute(&mut *tx).await?;
                q(lock)
                    .bind(namespace.to_string())
                    .fetch_one(&mut *tx)
                    .await?
            }
            None => upsert.fetch_one(&mut *tx).await?,
        };
        let (stored, next_id): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        if stored != max {
            tx.rollback().await?;
            return Ok(Err(Error::ConfigMismatch {
                namespace: namespace.to_string(),
                stored: u32::try_from(stored).unwrap_or(u32::MAX),
                requested: max_worker_id,
            }));
        }
        let held = q(&s.held_by_token)
            .bind(namespace.to_string())
            .bind(token.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(row) = held {
            // Sent again after its answer was lost: that grant, extended.
            let (id, fence, watermark): (i64, i64, i64) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            q(&s.extend_held)
                .bind(ttl_us)
                .bind(namespace.to_string())
                .bind(id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(grant_from_row(id, fence, watermark_from_sql(watermark)));
        }
        let head = q(&s.free_head)
            .bind(namespace.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let grant = match head {
            Some(row) => {
                let (id, fence, watermark): (i64, i64, i64) =
                    (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                q(&s.regrant)
                    .bind(token.to_string())
                    .bind(holder.to_string())
                    .bind(ttl_us)
                    .bind(fence + 1)
                    .bind(namespace.to_string())
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                (id, fence + 1, watermark_from_sql(watermark))
            }
            None if next_id <= max => {
                q(&s.grant_new)
                    .bind(namespace.to_string())
                    .bind(next_id)
                    .bind(token.to_string())
                    .bind(holder.to_string())
                    .bind(ttl_us)
                    .bind(watermark_to_sql(0))
                    .execute(&mut *tx)
                    .await?;
                q(&s.bump_next)
                    .bind(namespace.to_string())
                    .execute(&mut *tx)
                    .await?;
                (next_id, 1, 0)
            }
            None => {
                tx.rollback().await?;
                return Ok(Err(Error::NoAvailableId { max_worker_id }));
            }
        };
        tx.commit().await?;
        let (id, fence, previous_watermark) = grant;
        Ok(grant_from_row(id, fence, previous_watermark))
    }

    /// Acquire's fast path: one `UPDATE ... RETURNING` that grants the ID
    /// free longest. None when it granted nothing (no free ID, a namespace
    /// not created yet, another pool size): the full path then decides.
    async fn regrant_free(
        &self,
        fast: &str,
        namespace: &str,
        max_worker_id: u32,
        (token, holder): (&str, &str),
        ttl_us: i64,
    ) -> sqlx::Result<Option<Result<Grant>>> {
        let query = q(fast)
            .bind(token.to_string())
            .bind(holder.to_string())
            .bind(ttl_us)
            .bind(namespace.to_string())
            .bind(namespace.to_string())
            .bind(i64::from(max_worker_id))
            .bind(namespace.to_string())
            .bind(token.to_string());
        let row = crate::committed::first_row(query, &self.pool).await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (id, fence, watermark): (i64, i64, i64) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        Ok(Some(grant_from_row(
            id,
            fence,
            watermark_from_sql(watermark),
        )))
    }

    /// Runs a guarded renew or release (the statement `pick` chooses, whose
    /// first value is `first`): binds watermark, namespace, ID and token,
    /// and answers why it matched nothing if it did.
    async fn guarded(
        &self,
        pick: fn(&Statements) -> &String,
        first: i64,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        let (sql, ns, bound) = (self.sql.clone(), namespace.to_string(), token.to_string());
        let statement = move || {
            q(pick(&sql))
                .bind(first)
                .bind(watermark_to_sql(watermark))
                .bind(ns.clone())
                .bind(i64::from(id.get()))
                .bind(bound.clone())
        };
        let rows = match &self.group_commit {
            Some(group) => group
                .execute(&self.pool, Box::new(statement))
                .await
                .map_err(|e| self.unavailable(e))?,
            // A statement rolled back for a deadlock changed nothing: run it again.
            None => retrying(|| statement().execute(&self.pool))
                .await
                .map_err(|e| self.unavailable(e))?
                .rows_affected(),
        };
        match rows {
            1 => Ok(()),
            _ => {
                self.diagnose(namespace.as_str(), id, &token.to_string())
                    .await
            }
        }
    }

    /// A connection to begin a transaction on; on MySQL at READ COMMITTED, which takes no gap
    /// locks (REPEATABLE READ's next-key locks on the expiry index span
    /// neighbouring namespaces and deadlock concurrent acquirers).
    pub(crate) async fn connection_for_transaction(
        &self,
    ) -> sqlx::Result<sqlx::pool::PoolConnection<sqlx::Any>> {
        let mut conn = self.pool.acquire().await?;
        if self.dialect == Dialect::MySql {
            q("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
                .execute(&mut *conn)
                .await?;
        }
        Ok(conn)
    }

    /// Begins a transaction that will write: on SQLite `BEGIN IMMEDIATE`,
    /// which takes the write lock at once and waits the busy timeout for
    /// it. A deferred transaction that reads first cannot wait when it then
    /// writes: SQLite refuses the write at once when another connection
    /// holds the lock or committed since the read.
    pub(crate) async fn begin_write<'c>(
        &self,
        conn: &'c mut PoolConnection<Any>,
    ) -> sqlx::Result<sqlx::Transaction<'c, Any>> {
        if self.dialect == Dialect::Sqlite {
            sqlx::Connection::begin_with(&mut **conn, "BEGIN IMMEDIATE").await
        } else {
            sqlx::Acquire::begin(&mut **conn).await
        }
    }

    /// Whether to give a connection back to the pool after a transaction on
    /// it: on a SQLite file, one that failed closes instead. After some
    /// errors (a full disk, an I/O error) SQLite rolls the transaction back
    /// by itself, sqlx's own rollback then fails, and sqlx goes on counting
    /// the connection as in a transaction, which refuses every later
    /// `BEGIN IMMEDIATE` on it (the group commit's); the pool opens a fresh
    /// one. (An in-memory database lives in its one connection: kept.)
    pub(crate) fn after_transaction(&self, conn: &mut PoolConnection<Any>, succeeded: bool) {
        if !succeeded && self.dialect == Dialect::Sqlite && self.durable {
            conn.close_on_drop();
        }
    }

    /// Why a guarded renew or release matched nothing.
    async fn diagnose(&self, namespace: &str, id: WorkerId, token: &str) -> Result<()> {
        let row = q(&self.sql.inspect)
            .bind(namespace.to_string())
            .bind(i64::from(id.get()))
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.unavailable(e))?;
        let Some(row) = row else {
            return Err(Error::NotAssigned { id });
        };
        let read = |row: &AnyRow| -> sqlx::Result<(Option<String>, i64, i64)> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        };
        match read(&row).map_err(|e| self.unavailable(e))? {
            (None, _, _) => Err(Error::NotAssigned { id }),
            (Some(holder), _, _) if holder != token => Err(Error::TokenMismatch { id }),
            (Some(_), expires_at, now) if expires_at <= now => Err(Error::TokenExpired { id }),
            // Live and ours, yet the guarded UPDATE matched nothing: only a
            // database clock that went back explains it. Never a false
            // success: the caller may retry.
            (Some(_), _, _) => Err(Error::unavailable(
                "sql",
                "the lease is live but the guarded update matched nothing (database clock went back?)",
            )),
        }
    }
}

/// Runs a transaction again when the database rolled it back for a
/// deadlock or a serialization failure (SQLSTATE 40001 / 40P01), or SQLite
/// was busy past its timeout (code 5): nothing took effect, so running it
/// again is safe.
pub(crate) async fn retrying<T, F, Fut>(mut transaction: F) -> sqlx::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = sqlx::Result<T>>,
{
    let mut attempt = 0u32;
    loop {
        match transaction().await {
            Err(sqlx::Error::Database(e))
                if attempt < 8 && matches!(e.code().as_deref(), Some("40001" | "40P01" | "5")) =>
            {
                attempt += 1;
                tracing::debug!(attempt, "transaction rolled back ({e}); running it again");
                tokio::time::sleep(Duration::from_millis(u64::from(attempt) * 2)).await;
            }
            answer => return answer,
        }
    }
}

/// A grant from the columns a database returned; a row out of range is
/// `Unavailable` (a corrupt table), never a made-up grant.
pub(crate) fn grant_from_row(id: i64, fence: i64, previous_watermark: u64) -> Result<Grant> {
    match (u32::try_from(id), u64::try_from(fence)) {
        (Ok(id), Ok(fence)) => Ok(Grant {
            id: WorkerId::from(id),
            fence,
            previous_watermark,
        }),
        _ => Err(Error::unavailable(
            "sql",
            format!("corrupt row: id {id} fence {fence}"),
        )),
    }
}

#[async_trait]
impl LeaseStore for SqlStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            durable: self.durable,
            list: true,
            ..Capabilities::default()
        }
    }

    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        let token = token.to_string();
        let who = (token.as_str(), holder.as_str());
        let (ns, ttl_us) = (namespace.as_str(), micros(ttl));
        if let Some(fast) = &self.sql.regrant_free {
            let granted = retrying(|| self.regrant_free(fast, ns, max_worker_id, who, ttl_us))
                .await
                .map_err(|e| self.unavailable(e))?;
            if let Some(grant) = granted {
                return grant;
            }
        }
        match &self.sql.acquire_call {
            Some(call) => {
                retrying(|| self.acquire_by_routine(call, ns, max_worker_id, who, ttl_us)).await
            }
            None => retrying(|| self.acquire_tx(ns, max_worker_id, who, ttl_us)).await,
        }
        .map_err(|e| self.unavailable(e))?
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        let ttl = micros(ttl);
        self.guarded(|s| &s.renew, ttl, namespace, id, token, watermark)
            .await
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        let cleared = i64::from(watermark == 0);
        self.guarded(|s| &s.release, cleared, namespace, id, token, watermark)
            .await
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        self.list_namespace(namespace).await
    }

    async fn list_namespaces(&self) -> Result<Vec<workerid_core::NamespaceInfo>> {
        self.namespaces().await
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        self.force_release_id(namespace, id).await
    }

    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        self.remove_namespace_rows(namespace).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_keep_their_order_in_signed_columns() {
        let values = [
            0,
            1,
            1 << 53,
            (1 << 53) + 1,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX,
        ];
        for w in values.windows(2) {
            assert!(watermark_to_sql(w[0]) < watermark_to_sql(w[1]), "{w:?}");
        }
        for v in values {
            assert_eq!(watermark_from_sql(watermark_to_sql(v)), v);
        }
    }
}
