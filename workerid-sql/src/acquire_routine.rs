//! Acquire in one round trip, through a routine in the database that runs the
//! steps of the acquire transaction (find the lease the token already holds,
//! if the acquire was sent before; lock the namespace row, take the ID free
//! longest or a never-used one): a PL/pgSQL function on PostgreSQL, a stored
//! procedure on MySQL / MariaDB. SQLite, in-process, needs no round trip.
//!
//! PostgreSQL: each statement of the function takes a fresh snapshot (READ
//! COMMITTED, a VOLATILE function), so it behaves as the multi-statement
//! transaction does; the whole call is one statement, so it is also one
//! implicit transaction. The clock is `statement_timestamp()` of the call: the
//! instant the database began it, never before the client sent it, so the
//! grant lasts at least until the client's deadline.
//!
//! MySQL / MariaDB: the procedure reads the clock once at its start. Its fast
//! path is one autocommit `UPDATE ... ORDER BY expires_at LIMIT 1` at READ
//! COMMITTED (MySQL has no `UPDATE ... RETURNING`: the row it took is read
//! back from session variables it sets, only for the row it writes). It
//! cannot skip locked rows (the scan is of the secondary index, where InnoDB
//! has no semi-consistent read): concurrent acquirers wait in turn for the
//! first free row and then each take the next one. When it takes
//! nothing, the procedure runs the full READ COMMITTED transaction (rolled
//! back, and the error passed on, if any statement fails). Either way it
//! answers with one result row. A database user
//! without the `CREATE ROUTINE` privilege gets the multi-statement transaction
//! instead (a warning says so).

use sqlx::Row;
use workerid_core::{Error, Grant};

use crate::store::{grant_from_row, q, watermark_from_sql, watermark_to_sql, SqlStore};

/// The acquire routine's name for a lease table (a PostgreSQL function, a
/// MySQL procedure).
pub(crate) fn routine_name(table: &str) -> String {
    format!("{table}_acquire")
}

/// The procedure's name and `CREATE PROCEDURE IF NOT EXISTS ...` (MariaDB
/// 10.6+, MySQL 8.0.29+) for `table` (whose namespaces table is
/// `ns_table`); `now` is the dialect's clock expression, `ns`, `tok` and
/// `who` the column types. Run it as plain text: MySQL cannot prepare it.
/// The steps are the PostgreSQL function's, and so is the second look's
/// `SKIP LOCKED` (the first look, in the transaction, can leave a row
/// locked that it passed over). The name ends with a hash of
/// the body (MySQL has no `CREATE OR REPLACE PROCEDURE`): a database that
/// holds another body under the plain name keeps it, and this one is made
/// beside it, never called through a body it did not write.
pub(crate) fn create_procedure(
    table: &str,
    ns_table: &str,
    now: &str,
    ns: &str,
    tok: &str,
    who: &str,
) -> (String, String) {
    let body = procedure_body(table, ns_table, now, (ns, tok, who));
    // Within MySQL's 64 characters: a table name has at most 48.
    let name = format!("{}_{:07x}", routine_name(table), fnv1a(&body) & 0xfff_ffff);
    let create = format!("CREATE PROCEDURE IF NOT EXISTS {name}{body}");
    (name, create)
}

/// The 32-bit FNV-1a hash of `text`: stable across builds and platforms.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

/// The procedure from its parameter list on.
fn procedure_body(
    table: &str,
    ns_table: &str,
    now: &str,
    (ns, tok, who): (&str, &str, &str),
) -> String {
    format!(
        "(IN p_ns {ns}, IN p_max BIGINT, \
         IN p_token {tok}, IN p_holder {who}, IN p_ttl BIGINT, IN p_zero BIGINT) \
         MODIFIES SQL DATA \
         BEGIN \
           DECLARE v_now BIGINT DEFAULT {now}; \
           DECLARE v_stored BIGINT DEFAULT NULL; \
           DECLARE v_next BIGINT DEFAULT NULL; \
           DECLARE v_id BIGINT DEFAULT NULL; \
           DECLARE v_fence BIGINT; \
           DECLARE v_mark BIGINT; \
           DECLARE v_none INT DEFAULT 0; \
           DECLARE v_lock VARCHAR(64) DEFAULT CONCAT('workerid:', SHA1(CONCAT(p_ns, CHAR(1), p_token))); \
           DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_none = 1; \
           DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; DO RELEASE_LOCK(v_lock); RESIGNAL; END; \
           IF COALESCE(GET_LOCK(v_lock, {TOKEN_LOCK_WAIT_SECS}), 0) <> 1 THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'workerid: the token''s acquire lock was not free in time'; \
           END IF; \
           SET @workerid_id = NULL; \
           SET TRANSACTION ISOLATION LEVEL READ COMMITTED; \
           UPDATE {table} SET expires_at = v_now + p_ttl, \
             fence = (@workerid_fence := fence), watermark = (@workerid_mark := watermark), \
             worker_id = (@workerid_id := worker_id) \
             WHERE namespace = p_ns AND token = p_token AND expires_at > v_now \
             AND (SELECT n.max_worker_id FROM {ns_table} n WHERE n.namespace = p_ns) = p_max \
             LIMIT 1; \
           IF @workerid_id IS NULL THEN \
           SET TRANSACTION ISOLATION LEVEL READ COMMITTED; \
           UPDATE {table} SET token = p_token, holder = p_holder, expires_at = v_now + p_ttl, \
             fence = (@workerid_fence := fence + 1), watermark = (@workerid_mark := watermark), \
             worker_id = (@workerid_id := worker_id) \
             WHERE namespace = p_ns AND expires_at <= v_now \
             AND (SELECT n.max_worker_id FROM {ns_table} n WHERE n.namespace = p_ns) = p_max \
             ORDER BY expires_at LIMIT 1; \
           END IF; \
           IF @workerid_id IS NOT NULL THEN \
             SELECT 'ok', CAST(@workerid_id AS SIGNED), CAST(@workerid_fence AS SIGNED), \
               CAST(@workerid_mark AS SIGNED), p_max; \
           ELSE \
           SET TRANSACTION ISOLATION LEVEL READ COMMITTED; \
           START TRANSACTION; \
           SELECT max_worker_id INTO v_stored FROM {ns_table} WHERE namespace = p_ns; \
           IF v_stored IS NULL THEN \
             INSERT INTO {ns_table} (namespace, max_worker_id, next_id) VALUES (p_ns, p_max, 0) \
               ON DUPLICATE KEY UPDATE next_id = next_id; \
             SELECT max_worker_id INTO v_stored FROM {ns_table} WHERE namespace = p_ns; \
           END IF; \
           IF v_stored <> p_max THEN \
             ROLLBACK; \
             SELECT 'mismatch', CAST(NULL AS SIGNED), CAST(NULL AS SIGNED), \
               CAST(NULL AS SIGNED), v_stored; \
           ELSE \
             SELECT worker_id, fence, watermark INTO v_id, v_fence, v_mark FROM {table} \
               WHERE namespace = p_ns AND expires_at <= v_now \
               ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED; \
             IF v_id IS NULL THEN \
               SELECT next_id INTO v_next FROM {ns_table} WHERE namespace = p_ns FOR UPDATE; \
               SELECT worker_id, fence, watermark INTO v_id, v_fence, v_mark FROM {table} \
                 WHERE namespace = p_ns AND expires_at <= v_now \
                 ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED; \
             END IF; \
             IF v_id IS NOT NULL THEN \
               UPDATE {table} SET token = p_token, holder = p_holder, \
                 expires_at = v_now + p_ttl, fence = v_fence + 1 WHERE namespace = p_ns AND worker_id = v_id; \
               COMMIT; \
               SELECT 'ok', v_id, v_fence + 1, v_mark, v_stored; \
             ELSEIF v_next <= p_max THEN \
               INSERT INTO {table} \
                 (namespace, worker_id, token, holder, expires_at, fence, watermark) \
                 VALUES (p_ns, v_next, p_token, p_holder, v_now + p_ttl, 1, p_zero); \
               UPDATE {ns_table} SET next_id = next_id + 1 WHERE namespace = p_ns; \
               COMMIT; \
               SELECT 'ok', v_next, CAST(1 AS SIGNED), p_zero, v_stored; \
             ELSE \
               ROLLBACK; \
               SELECT 'full', CAST(NULL AS SIGNED), CAST(NULL AS SIGNED), \
                 CAST(NULL AS SIGNED), v_stored; \
             END IF; \
           END IF; \
           END IF; \
           DO RELEASE_LOCK(v_lock); \
         END"
    )
}

/// The class of the advisory locks (PostgreSQL) an acquire takes on its
/// namespace and token, for the length of its call: two acquires with one
/// token (the first still running when its client sent it again on
/// another connection) then run one after the other, and the second finds
/// the first's grant instead of making another. ("wkid" in ASCII.)
const TOKEN_LOCK_CLASS: i32 = 0x776b_6964;

/// How long a MySQL acquire waits for the named lock on its namespace and
/// token (`GET_LOCK`, the session's, released before it answers) before it
/// fails, as a database error (`Unavailable`).
const TOKEN_LOCK_WAIT_SECS: u32 = 10;

/// `CREATE OR REPLACE FUNCTION ...` for `table` (whose namespaces table is
/// `ns_table`); `now` is the dialect's clock expression.
///
/// The fast path reads the namespace row without locking it (its pool size
/// never changes) and takes the ID free longest in one `UPDATE` whose
/// subquery skips rows other acquirers have locked: one row written, as a
/// renewal writes. Only when it finds nothing does it lock the namespace row,
/// look again, then hand out a never-used ID.
///
/// The second look skips locked rows too. The first can leave a row locked
/// that it then passed over (another acquirer took it first), and such a
/// call then waits for the namespace row: had the holder of the namespace
/// row waited for that lock, the two would deadlock. A row another call has
/// locked is one it is granting (or one already live), so skipping it hands
/// out no ID twice.
pub(crate) fn create_function(table: &str, ns_table: &str, now: &str) -> String {
    let name = routine_name(table);
    format!(
        "CREATE OR REPLACE FUNCTION {name}(p_ns VARCHAR, p_max BIGINT, p_token VARCHAR, \
         p_holder VARCHAR, p_ttl BIGINT, p_zero BIGINT) \
         RETURNS TABLE (r_status TEXT, r_id BIGINT, r_fence BIGINT, r_watermark BIGINT, \
         r_stored BIGINT) LANGUAGE plpgsql VOLATILE AS $fn$ \
         DECLARE v_stored BIGINT; v_next BIGINT; v_id BIGINT; v_fence BIGINT; v_mark BIGINT; \
         BEGIN \
           PERFORM pg_advisory_xact_lock({TOKEN_LOCK_CLASS}, hashtext(p_ns || chr(1) || p_token)); \
           SELECT n.max_worker_id INTO v_stored FROM {ns_table} n WHERE n.namespace = p_ns; \
           IF NOT FOUND THEN \
             INSERT INTO {ns_table} (namespace, max_worker_id, next_id) VALUES (p_ns, p_max, 0) \
               ON CONFLICT (namespace) DO NOTHING; \
             SELECT n.max_worker_id INTO v_stored FROM {ns_table} n WHERE n.namespace = p_ns; \
           END IF; \
           IF v_stored <> p_max THEN \
             RETURN QUERY SELECT 'mismatch'::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, v_stored; \
             RETURN; \
           END IF; \
           UPDATE {table} l SET expires_at = {now} + p_ttl \
             WHERE l.namespace = p_ns AND l.token = p_token AND l.expires_at > {now} \
             RETURNING l.worker_id, l.fence, l.watermark INTO v_id, v_fence, v_mark; \
           IF FOUND THEN \
             RETURN QUERY SELECT 'ok'::TEXT, v_id, v_fence, v_mark, v_stored; \
             RETURN; \
           END IF; \
           UPDATE {table} l SET token = p_token, holder = p_holder, \
             expires_at = {now} + p_ttl, fence = l.fence + 1 \
             WHERE (l.namespace, l.worker_id) = (SELECT f.namespace, f.worker_id FROM {table} f \
               WHERE f.namespace = p_ns AND f.expires_at <= {now} \
               ORDER BY f.expires_at LIMIT 1 FOR UPDATE SKIP LOCKED) \
             RETURNING l.worker_id, l.fence, l.watermark INTO v_id, v_fence, v_mark; \
           IF FOUND THEN \
             RETURN QUERY SELECT 'ok'::TEXT, v_id, v_fence, v_mark, v_stored; \
             RETURN; \
           END IF; \
           SELECT n.next_id INTO v_next FROM {ns_table} n WHERE n.namespace = p_ns FOR UPDATE; \
           SELECT l.worker_id, l.fence, l.watermark INTO v_id, v_fence, v_mark FROM {table} l \
             WHERE l.namespace = p_ns AND l.expires_at <= {now} \
             ORDER BY l.expires_at LIMIT 1 FOR UPDATE SKIP LOCKED; \
           IF FOUND THEN \
             UPDATE {table} l SET token = p_token, holder = p_holder, \
               expires_at = {now} + p_ttl, fence = v_fence + 1 \
               WHERE l.namespace = p_ns AND l.worker_id = v_id; \
             RETURN QUERY SELECT 'ok'::TEXT, v_id, v_fence + 1, v_mark, v_stored; \
             RETURN; \
           END IF; \
           IF v_next <= p_max THEN \
             INSERT INTO {table} \
               (namespace, worker_id, token, holder, expires_at, fence, watermark) \
               VALUES (p_ns, v_next, p_token, p_holder, {now} + p_ttl, 1, p_zero); \
             UPDATE {ns_table} n SET next_id = n.next_id + 1 WHERE n.namespace = p_ns; \
             RETURN QUERY SELECT 'ok'::TEXT, v_next, 1::BIGINT, p_zero, v_stored; \
             RETURN; \
           END IF; \
           RETURN QUERY SELECT 'full'::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, v_stored; \
         END $fn$"
    )
}

/// The call of PostgreSQL's function for `table`, with six placeholders:
/// namespace, max_worker_id, token, holder, ttl in µs, the stored form of
/// watermark zero.
pub(crate) fn call_function(table: &str) -> String {
    format!(
        "SELECT r_status, r_id, r_fence, r_watermark, r_stored FROM {}($1, $2, $3, $4, $5, $6)",
        routine_name(table)
    )
}

/// The call of MySQL's procedure `name`, with the same six placeholders.
pub(crate) fn call_procedure(name: &str) -> String {
    format!("CALL {name}(?, ?, ?, ?, ?, ?)")
}

impl SqlStore {
    /// Acquire through the routine: one round trip. The outer error is the
    /// database's, the inner one the contract's answer.
    pub(crate) async fn acquire_by_routine(
        &self,
        call: &str,
        namespace: &str,
        max_worker_id: u32,
        (token, holder): (&str, &str),
        ttl_us: i64,
    ) -> sqlx::Result<workerid_core::Result<Grant>> {
        // All result sets (a procedure's CALL ends with one of its own), so
        // the connection goes back to the pool with nothing left to read.
        let rows = q(call)
            .bind(namespace.to_string())
            .bind(i64::from(max_worker_id))
            .bind(token.to_string())
            .bind(holder.to_string())
            .bind(ttl_us)
            .bind(watermark_to_sql(0))
            .fetch_all(self.pool())
            .await?;
        let row = rows.into_iter().next().ok_or(sqlx::Error::RowNotFound)?;
        let status: String = row.try_get(0)?;
        let (id, fence, watermark, stored): (Option<i64>, Option<i64>, Option<i64>, i64) = (
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
            row.try_get(4)?,
        );
        let corrupt = || {
            Error::unavailable(
                "sql",
                format!("unexpected acquire answer: {status} {id:?} {fence:?} {stored}"),
            )
        };
        Ok(match (status.as_str(), id, fence, watermark) {
            ("ok", Some(id), Some(fence), Some(watermark)) => {
                grant_from_row(id, fence, watermark_from_sql(watermark))
            }
            ("full", ..) => Err(Error::NoAvailableId { max_worker_id }),
            ("mismatch", ..) => Err(Error::ConfigMismatch {
                namespace: namespace.to_string(),
                stored: u32::try_from(stored).unwrap_or(u32::MAX),
                requested: max_worker_id,
            }),
            _ => Err(corrupt()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_procedure_gets_a_name_of_its_own_within_mysqls_limit() {
        let table = "t".repeat(48);
        let make = |now| create_procedure(&table, "ns", now, "VARCHAR(64)", "CHAR(22)", "TEXT");
        let (name, create) = make("1");
        assert!(name.len() <= 64, "{name}");
        assert!(name.starts_with(&format!("{table}_acquire_")), "{name}");
        assert!(create.starts_with(&format!("CREATE PROCEDURE IF NOT EXISTS {name}(")));
        assert_eq!(make("1").0, name, "the same text, the same name");
        assert_ne!(make("2").0, name, "another text, another name");
    }
}
