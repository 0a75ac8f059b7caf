//! The SQL each database speaks: clock, upsert, locking, placeholders.
//!
//! Every statement is built once per store from a validated table name (so it
//! cannot inject SQL) and kept; values always go through bind parameters.

use workerid_core::{Error, Result};

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    MySql,
    /// SQLite (an embedded database: its clock is the local clock).
    Sqlite,
}

impl Dialect {
    /// The dialect of a sqlx `Any` backend name.
    pub(crate) fn from_backend(name: &str) -> Result<Dialect> {
        match name {
            "PostgreSQL" => Ok(Dialect::Postgres),
            "MySQL" => Ok(Dialect::MySql),
            "SQLite" => Ok(Dialect::Sqlite),
            other => Err(Error::invalid_config(format!(
                "unsupported database {other:?}"
            ))),
        }
    }

    /// The database's clock, in microseconds since the Unix epoch, fixed for
    /// the statement. MySQL's is counted from UTC, whatever the session's
    /// time zone: `UNIX_TIMESTAMP(NOW())` goes through local time, which
    /// repeats an hour where a zone's clocks go back.
    pub(crate) fn now_us(self) -> &'static str {
        match self {
            Dialect::Postgres => {
                "CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000 AS BIGINT)"
            }
            Dialect::MySql => "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
            Dialect::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)",
        }
    }

    /// The type a `CAST` to a 64-bit integer names (PostgreSQL's `int4`
    /// columns, as a hand-made Leaf table may have, do not decode as `i64`).
    pub(crate) fn bigint_cast(self) -> &'static str {
        match self {
            Dialect::MySql => "SIGNED",
            _ => "BIGINT",
        }
    }

    fn greatest(self) -> &'static str {
        match self {
            Dialect::Sqlite => "MAX",
            _ => "GREATEST",
        }
    }

    /// A case-sensitive ASCII text column (MySQL compares case-insensitively
    /// by default, which would merge namespaces `A` and `a`).
    pub(crate) fn ascii(self, len: u32) -> String {
        match self {
            Dialect::MySql => format!("VARCHAR({len}) CHARACTER SET ascii COLLATE ascii_bin"),
            _ => format!("VARCHAR({len})"),
        }
    }

    /// Rewrites `?` placeholders as `$1, $2, ...` for PostgreSQL.
    pub(crate) fn placeholders(self, sql: &str) -> String {
        if self != Dialect::Postgres {
            return sql.to_string();
        }
        let mut out = String::with_capacity(sql.len() + 8);
        let mut n = 0;
        for c in sql.chars() {
            if c == '?' {
                n += 1;
                out.push_str(&format!("${n}"));
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// Checks a table name: 1 to 48 bytes of `[A-Za-z_][A-Za-z0-9_]*`, so it can
/// be written into SQL as it is.
pub(crate) fn check_table(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = (1..=48).contains(&name.len())
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "table name {name:?} must be 1 to 48 bytes of [A-Za-z_][A-Za-z0-9_]*"
        )))
    }
}

/// An index of the schema: its name, and the statement that makes it
/// unless it exists.
#[derive(Debug)]
pub(crate) struct Index {
    pub name: String,
    pub create: String,
}

/// Every statement a store runs.
#[derive(Debug)]
pub(crate) struct Statements {
    /// Schema, in order (idempotent).
    pub schema: Vec<String>,
    /// Indexes made after `schema` (MySQL's are in its tables).
    pub indexes: Vec<Index>,
    /// Acquire, step 1: create the namespace row if missing and lock it;
    /// returns `max_worker_id, next_id` (MySQL: `lock_namespace` does the
    /// returning). Binds: namespace, max_worker_id.
    pub upsert_namespace: String,
    /// MySQL only: `SELECT max_worker_id, next_id ... FOR UPDATE`. Binds: namespace.
    pub lock_namespace: Option<String>,
    /// The free ID that has been free longest. Binds: namespace.
    /// Returns `worker_id, fence, watermark`.
    pub free_head: String,
    /// The live lease a token holds (an acquire sent again after its answer
    /// was lost). Binds: namespace, token. Returns `worker_id, fence,
    /// watermark`, locked.
    pub held_by_token: String,
    /// Extends the lease `held_by_token` found. Binds: ttl_us, namespace,
    /// worker_id.
    pub extend_held: String,
    /// Grants a free ID again. Binds: token, holder, ttl_us, fence, namespace, worker_id.
    pub regrant: String,
    /// Acquire's fast path, one statement: grants the ID free longest, if
    /// any, when the namespace exists with this pool size (`UPDATE ...
    /// RETURNING`). SQLite only, whose writes run one at a time: elsewhere
    /// two acquires with one token would each find no lease of the token's
    /// and take a free ID each, so PostgreSQL goes to its function, which
    /// locks the token first, and MySQL to its procedure, which does too.
    /// Binds: token, holder, ttl_us, namespace, namespace, max_worker_id,
    /// namespace, token. Returns `worker_id, fence, watermark` of the grant,
    /// or no row (nothing free, a new namespace, another pool size, or the
    /// token already holds a live lease: the full path decides).
    pub regrant_free: Option<String>,
    /// Grants a never-used ID. Binds: namespace, worker_id, token, holder, ttl_us,
    /// watermark zero.
    pub grant_new: String,
    /// Binds: namespace.
    pub bump_next: String,
    /// Binds: ttl_us, watermark, namespace, worker_id, token.
    pub renew: String,
    /// A release's watermark (other than 0) is its holder's final word.
    /// Binds: keep (1: leave the watermark), watermark, namespace,
    /// worker_id, token.
    pub release: String,
    /// Why a renew or release matched nothing. Binds: namespace, worker_id.
    /// Returns `token, expires_at, now`.
    pub inspect: String,
    /// A namespace's pool size and every lease, in one statement. Binds:
    /// namespace. Returns `max_worker_id, worker_id, token, expires_at,
    /// fence, watermark, now, holder` per ID (the lease columns NULL for a
    /// namespace without leases), no row for a namespace never used.
    pub list: String,
    /// Frees a live lease whatever its token. Binds: namespace, worker_id.
    /// Affects 1 row when it did.
    pub force_release: String,
    /// Every namespace: `namespace, max_worker_id, live` (live leases on the
    /// database's clock). No binds.
    pub list_namespaces: String,
    /// Remove a namespace, in one transaction: lock its row (binds:
    /// namespace; no row: never used), delete its leases that are not live
    /// (binds: namespace), count what is left (binds: namespace; live
    /// leases), delete its row (binds: namespace).
    pub remove_lock: String,
    pub remove_not_live: String,
    pub remove_count_left: String,
    pub remove_namespace: String,
    /// PostgreSQL: acquire in one call of a server-side function (created
    /// with the schema). Others: None, acquire is a short transaction.
    /// How acquire calls the database's routine (one round trip); None: the
    /// multi-statement transaction.
    pub acquire_call: Option<String>,
    /// A routine to create after `schema`, as plain text, that a database
    /// user may lack the privilege for (MySQL's stored procedure).
    pub routine: Option<String>,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect, table: &str) -> Statements {
        let d = dialect;
        let ns_table = format!("{table}_namespaces");
        let now = d.now_us();
        let greatest = d.greatest();
        let lock = if d == Dialect::Sqlite {
            ""
        } else {
            " FOR UPDATE"
        };
        let namespace_col = d.ascii(128);
        let token_col = d.ascii(22);
        let holder_col = d.ascii(128);
        let mut schema = vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {ns_table} (\
                 namespace {namespace_col} NOT NULL PRIMARY KEY, \
                 max_worker_id BIGINT NOT NULL, \
                 next_id BIGINT NOT NULL)"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (\
                 namespace {namespace_col} NOT NULL, \
                 worker_id BIGINT NOT NULL, \
                 token {token_col} NULL, \
                 holder {holder_col} NOT NULL, \
                 expires_at BIGINT NOT NULL, \
                 fence BIGINT NOT NULL, \
                 watermark BIGINT NOT NULL, \
                 PRIMARY KEY (namespace, worker_id){})",
                if d == Dialect::MySql {
                    format!(
                        ", INDEX {table}_free (namespace, expires_at), \
                         INDEX {table}_token (namespace, token)"
                    )
                } else {
                    String::new()
                }
            ),
        ];
        let mut indexes = Vec::new();
        if d != Dialect::MySql {
            // The free IDs of a namespace, and (for an acquire sent again)
            // the lease of a token, each found without a scan.
            for (suffix, columns) in [
                ("free", "namespace, expires_at"),
                ("token", "namespace, token"),
            ] {
                let name = format!("{table}_{suffix}");
                indexes.push(Index {
                    create: format!("CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})"),
                    name,
                });
            }
        }
        let mut acquire_call = None;
        let mut routine = None;
        match d {
            Dialect::Postgres => {
                schema.push(crate::acquire_routine::create_function(
                    table, &ns_table, now,
                ));
                acquire_call = Some(crate::acquire_routine::call_function(table));
            }
            Dialect::MySql => {
                let (name, create) = crate::acquire_routine::create_procedure(
                    table,
                    &ns_table,
                    now,
                    &namespace_col,
                    &token_col,
                    &holder_col,
                );
                acquire_call = Some(crate::acquire_routine::call_procedure(&name));
                routine = Some(create);
            }
            Dialect::Sqlite => {}
        }
        let (upsert_namespace, lock_namespace) = match d {
            Dialect::MySql => (
                format!(
                    "INSERT INTO {ns_table} (namespace, max_worker_id, next_id) VALUES (?, ?, 0) \
                     ON DUPLICATE KEY UPDATE next_id = next_id"
                ),
                Some(format!(
                    "SELECT max_worker_id, next_id FROM {ns_table} WHERE namespace = ? FOR UPDATE"
                )),
            ),
            _ => (
                format!(
                    "INSERT INTO {ns_table} (namespace, max_worker_id, next_id) VALUES (?, ?, 0) \
                     ON CONFLICT (namespace) DO UPDATE SET next_id = {ns_table}.next_id \
                     RETURNING max_worker_id, next_id"
                ),
                None,
            ),
        };
        let p = |sql: String| d.placeholders(&sql);
        Statements {
            schema,
            indexes,
            upsert_namespace: p(upsert_namespace),
            lock_namespace: lock_namespace.map(p),
            free_head: p(format!(
                "SELECT worker_id, fence, watermark FROM {table} \
                 WHERE namespace = ? AND expires_at <= {now} \
                 ORDER BY expires_at LIMIT 1{lock}"
            )),
            held_by_token: p(format!(
                "SELECT worker_id, fence, watermark FROM {table} \
                 WHERE namespace = ? AND token = ? AND expires_at > {now}{lock}"
            )),
            extend_held: p(format!(
                "UPDATE {table} SET expires_at = {now} + ? \
                 WHERE namespace = ? AND worker_id = ?"
            )),
            regrant: p(format!(
                "UPDATE {table} SET token = ?, holder = ?, expires_at = {now} + ?, fence = ? \
                 WHERE namespace = ? AND worker_id = ?"
            )),
            regrant_free: (d == Dialect::Sqlite).then(|| {
                p(format!(
                    "UPDATE {table} SET token = ?, holder = ?, expires_at = {now} + ?, \
                     fence = fence + 1 \
                     WHERE (namespace, worker_id) = (SELECT f.namespace, f.worker_id \
                       FROM {table} f WHERE f.namespace = ? AND f.expires_at <= {now} \
                       ORDER BY f.expires_at LIMIT 1) \
                     AND (SELECT n.max_worker_id FROM {ns_table} n WHERE n.namespace = ?) = ? \
                     AND NOT EXISTS (SELECT 1 FROM {table} t WHERE t.namespace = ? \
                       AND t.token = ? AND t.expires_at > {now}) \
                     RETURNING worker_id, fence, watermark"
                ))
            }),
            grant_new: p(format!(
                "INSERT INTO {table} \
                 (namespace, worker_id, token, holder, expires_at, fence, watermark) \
                 VALUES (?, ?, ?, ?, {now} + ?, 1, ?)"
            )),
            bump_next: p(format!(
                "UPDATE {ns_table} SET next_id = next_id + 1 WHERE namespace = ?"
            )),
            renew: p(format!(
                "UPDATE {table} SET expires_at = {now} + ?, watermark = {greatest}(watermark, ?) \
                 WHERE namespace = ? AND worker_id = ? AND token = ? AND expires_at > {now}"
            )),
            release: p(format!(
                "UPDATE {table} SET token = NULL, expires_at = {now}, \
                 watermark = CASE WHEN ? = 1 THEN watermark ELSE ? END \
                 WHERE namespace = ? AND worker_id = ? AND token = ? AND expires_at > {now}"
            )),
            inspect: p(format!(
                "SELECT token, expires_at, {now} FROM {table} WHERE namespace = ? AND worker_id = ?"
            )),
            list: p(format!(
                "SELECT n.max_worker_id, l.worker_id, l.token, l.expires_at, l.fence, \
                 l.watermark, {now}, l.holder FROM {ns_table} n \
                 LEFT JOIN {table} l ON l.namespace = n.namespace \
                 WHERE n.namespace = ? ORDER BY l.worker_id"
            )),
            force_release: p(format!(
                "UPDATE {table} SET token = NULL, expires_at = {now} \
                 WHERE namespace = ? AND worker_id = ? AND token IS NOT NULL AND expires_at > {now}"
            )),
            list_namespaces: format!(
                "SELECT n.namespace, n.max_worker_id, \
                 (SELECT COUNT(*) FROM {table} l WHERE l.namespace = n.namespace \
                 AND l.token IS NOT NULL AND l.expires_at > {now}) \
                 FROM {ns_table} n"
            ),
            remove_lock: p(format!(
                "SELECT max_worker_id FROM {ns_table} WHERE namespace = ?{lock}"
            )),
            remove_not_live: p(format!(
                "DELETE FROM {table} WHERE namespace = ? \
                 AND (token IS NULL OR expires_at <= {now})"
            )),
            remove_count_left: p(format!("SELECT COUNT(*) FROM {table} WHERE namespace = ?")),
            remove_namespace: p(format!("DELETE FROM {ns_table} WHERE namespace = ?")),
            acquire_call,
            routine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_gets_numbered_placeholders() {
        let s = Statements::new(Dialect::Postgres, "leases");
        assert!(s.renew.contains("$1") && s.renew.contains("$5") && !s.renew.contains('?'));
        let m = Statements::new(Dialect::MySql, "leases");
        assert!(m.renew.contains('?') && !m.renew.contains("$1"));
    }

    #[test]
    fn table_names_cannot_inject() {
        assert!(check_table("workerid_leases").is_ok());
        assert!(check_table("_t1").is_ok());
        for bad in [
            "",
            "1t",
            "t;DROP TABLE x",
            "t t",
            "t\"",
            "schema.t",
            &"t".repeat(49),
        ] {
            assert!(check_table(bad).is_err(), "{bad:?}");
        }
    }
}
