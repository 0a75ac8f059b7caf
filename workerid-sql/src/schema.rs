//! The schema: created (with the acquire routine) by a store that may
//! write, checked without a change by a read-only one.

use sqlx::{AssertSqlSafe, Row};
use workerid_core::{Error, Result};

use crate::dialect::Dialect;
use crate::store::{q, retrying, SqlStore};

/// The longest the `ALTER TABLE` adding the version column waits for the
/// segment table's lock.
const ALTER_LOCK_WAIT_SECS: u32 = 5;

impl SqlStore {
    /// Refuses a database without `tables`, changing nothing.
    pub(crate) async fn check_tables(&self, tables: &[String]) -> Result<()> {
        for table in tables {
            let probe = format!("SELECT 1 FROM {table} WHERE 1 = 0");
            match sqlx::query(AssertSqlSafe(probe)).execute(self.pool()).await {
                Ok(_) => {}
                // PostgreSQL's and MySQL's "undefined table", SQLite's words.
                Err(sqlx::Error::Database(e))
                    if matches!(e.code().as_deref(), Some("42P01" | "42S02"))
                        || e.message().contains("no such table") =>
                {
                    return Err(Error::unavailable(
                        "sql",
                        format!(
                            "not initialised: no table {table} ({}); the first process \
                             that uses this database creates the tables",
                            e.message()
                        ),
                    ))
                }
                Err(e) => return Err(self.unavailable(e)),
            }
        }
        Ok(())
    }

    /// Creates the tables, index and acquire routine if missing. Idempotent,
    /// and safe from many processes at once (PostgreSQL: an advisory lock;
    /// MySQL: `GET_LOCK`; SQLite: the database lock). Returns false when the
    /// database user may not create the MySQL procedure (acquire then runs
    /// its transaction statement by statement).
    pub(crate) async fn migrate(&self) -> Result<bool> {
        let fail = |e| Error::unavailable("sql", e);
        if self.dialect() == Dialect::Sqlite {
            // Switching modes needs the database to itself: only when needed,
            // and again while another connection is busy.
            let mode: String = retrying(|| async {
                let row = q("PRAGMA journal_mode").fetch_one(self.pool()).await?;
                row.try_get(0)
            })
            .await
            .map_err(fail)?;
            if !mode.eq_ignore_ascii_case("wal") {
                retrying(|| q("PRAGMA journal_mode=WAL").execute(self.pool()))
                    .await
                    .map_err(fail)?;
            }
        }
        let mut conn = self.pool().acquire().await.map_err(fail)?;
        match self.dialect() {
            Dialect::Postgres => {
                q("BEGIN").execute(&mut *conn).await.map_err(fail)?;
                q("SELECT pg_advisory_xact_lock(7166162633377437778)")
                    .execute(&mut *conn)
                    .await
                    .map_err(fail)?;
            }
            Dialect::MySql => {
                q("SELECT GET_LOCK('workerid_schema', 60)")
                    .execute(&mut *conn)
                    .await
                    .map_err(fail)?;
            }
            Dialect::Sqlite => {}
        }
        let made = self.create_all(&mut conn).await;
        // Ended either way, so that a connection the pool keeps holds no
        // lock and no aborted transaction (its owner's pool, say).
        let end = match (self.dialect(), &made) {
            (Dialect::Postgres, Ok(_)) => "COMMIT",
            (Dialect::Postgres, Err(_)) => "ROLLBACK",
            (Dialect::MySql, _) => "SELECT RELEASE_LOCK('workerid_schema')",
            (Dialect::Sqlite, _) => return made,
        };
        let ended = q(end).execute(&mut *conn).await;
        let routine_made = made?;
        ended.map_err(fail)?;
        Ok(routine_made)
    }

    /// The tables, indexes, version column and acquire routine, on `conn`
    /// with the schema lock held: whether the routine was made.
    async fn create_all(&self, conn: &mut sqlx::AnyConnection) -> Result<bool> {
        let fail = |e| Error::unavailable("sql", e);
        for statement in self
            .statements()
            .schema
            .iter()
            .chain([&self.segments().schema])
        {
            q(statement).execute(&mut *conn).await.map_err(fail)?;
        }
        for index in &self.statements().indexes {
            if self.dialect() == Dialect::Postgres
                && index_exists(conn, &index.name).await.map_err(fail)?
            {
                continue;
            }
            q(&index.create).execute(&mut *conn).await.map_err(fail)?;
        }
        if self.segments().versioned {
            self.add_segment_version(conn).await?;
        }
        let mut routine_made = true;
        if let Some(routine) = &self.statements().routine {
            let made = sqlx::raw_sql(AssertSqlSafe(routine.clone()))
                .execute(&mut *conn)
                .await;
            match made {
                Ok(_) => {}
                Err(sqlx::Error::Database(e))
                    if e.message().contains("denied") || e.message().contains("privilege") =>
                {
                    tracing::warn!(
                        "cannot create the acquire procedure ({e}): acquire runs its \
                         transaction statement by statement (grant CREATE ROUTINE for one round trip)"
                    );
                    routine_made = false;
                }
                Err(e) => return Err(fail(e)),
            }
        }
        Ok(routine_made)
    }
}

/// Whether PostgreSQL has the index `name` (schema-qualified or on the
/// search path). Asked before `CREATE INDEX IF NOT EXISTS`, which takes a
/// lock on the table that waits for every transaction writing to it and
/// holds back every later one until the schema's transaction ends, even
/// when the index is there.
async fn index_exists(conn: &mut sqlx::AnyConnection, name: &str) -> sqlx::Result<bool> {
    let row = q("SELECT CAST(to_regclass($1) IS NOT NULL AS INTEGER)")
        .bind(name.to_string())
        .fetch_one(&mut *conn)
        .await?;
    Ok(row.try_get::<i32, _>(0)? == 1)
}

impl SqlStore {
    /// Adds the version column that give-backs compare to a segment table
    /// made without it (go-id-alloc's or Leaf's, as their servers create
    /// it), saying so first. Their servers name the columns they use, so a
    /// column more, with a default, changes nothing for them.
    async fn add_segment_version(&self, conn: &mut sqlx::AnyConnection) -> Result<()> {
        let fail = |e| Error::unavailable("sql", e);
        // A failed statement aborts a PostgreSQL transaction: the probe runs
        // inside a savepoint there.
        let postgres = self.dialect() == Dialect::Postgres;
        if postgres {
            q("SAVEPOINT has_version")
                .execute(&mut *conn)
                .await
                .map_err(fail)?;
        }
        let missing = q(&self.segments().has_version)
            .execute(&mut *conn)
            .await
            .is_err();
        if postgres {
            let end = if missing {
                "ROLLBACK TO SAVEPOINT has_version"
            } else {
                "RELEASE SAVEPOINT has_version"
            };
            q(end).execute(&mut *conn).await.map_err(fail)?;
        }
        if missing {
            tracing::warn!(
                statement = %self.segments().add_version,
                "the segment table has no version column: adding it, so that unused IDs can be \
                 given back safely (servers that do not know it are unaffected; \
                 segment_versions=false keeps the table as it is, without give-backs)"
            );
            self.add_version_within(conn).await?;
        }
        Ok(())
    }

    /// Runs the `ALTER TABLE` that adds the version column, waiting at most
    /// [`ALTER_LOCK_WAIT_SECS`] for the table's lock: a long transaction
    /// on the table fails the start, with the statement to run later,
    /// rather than queueing every other server's reservations behind the
    /// waiting `ALTER`.
    async fn add_version_within(&self, conn: &mut sqlx::AnyConnection) -> Result<()> {
        let statement = &self.segments().add_version;
        let (bound, unbound) = match self.dialect() {
            // Within the transaction: it ends with it.
            Dialect::Postgres => (
                format!("SET LOCAL lock_timeout = '{ALTER_LOCK_WAIT_SECS}s'"),
                None,
            ),
            // A session setting, on a connection the pool keeps: put back.
            Dialect::MySql => (
                format!("SET SESSION lock_wait_timeout = {ALTER_LOCK_WAIT_SECS}"),
                Some("SET SESSION lock_wait_timeout = DEFAULT"),
            ),
            Dialect::Sqlite => {
                return q(statement)
                    .execute(&mut *conn)
                    .await
                    .map(drop)
                    .map_err(|e| Error::unavailable("sql", e))
            }
        };
        let fail = |e: sqlx::Error| Error::unavailable("sql", e);
        q(&bound).execute(&mut *conn).await.map_err(fail)?;
        let altered = q(statement).execute(&mut *conn).await;
        if let Some(unbound) = unbound {
            q(unbound).execute(&mut *conn).await.map_err(fail)?;
        }
        altered.map(drop).map_err(|e| {
            Error::unavailable(
                "sql",
                format!(
                    "could not add the version column within {ALTER_LOCK_WAIT_SECS} s ({e}); \
                     run `{statement}` when no transaction holds the table, or open with \
                     segment_versions=false"
                ),
            )
        })
    }
}
