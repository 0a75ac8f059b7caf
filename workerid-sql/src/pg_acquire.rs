//! PostgreSQL: acquire in one round trip, through a PL/pgSQL function that
//! runs the same steps as the acquire transaction of the other databases
//! (lock the namespace row, take the ID free longest or a never-used one),
//! inside the database.
//!
//! Each statement of the function takes a fresh snapshot (READ COMMITTED, a
//! VOLATILE function), so it behaves as the multi-statement transaction does;
//! the whole call is one statement, so it is also one implicit transaction.
//! The clock is `statement_timestamp()` of the call: the instant the
//! database began it, never before the client sent it, so the grant lasts at
//! least until the client's deadline.

use sqlx::Row;
use workerid_core::{Error, Grant, WorkerId};

use crate::store::{q, watermark_from_sql, watermark_to_sql, SqlStore};

/// The function's name for a lease table.
pub(crate) fn function_name(table: &str) -> String {
    format!("{table}_acquire")
}

/// `CREATE OR REPLACE FUNCTION ...` for `table` (whose namespaces table is
/// `ns_table`); `now` is the dialect's clock expression.
pub(crate) fn create_function(table: &str, ns_table: &str, now: &str) -> String {
    let name = function_name(table);
    format!(
        "CREATE OR REPLACE FUNCTION {name}(p_ns VARCHAR, p_max BIGINT, p_token VARCHAR, \
         p_ttl BIGINT, p_zero BIGINT) \
         RETURNS TABLE (r_status TEXT, r_id BIGINT, r_fence BIGINT, r_watermark BIGINT, \
         r_stored BIGINT) LANGUAGE plpgsql VOLATILE AS $fn$ \
         DECLARE v_stored BIGINT; v_next BIGINT; v_id BIGINT; v_fence BIGINT; v_mark BIGINT; \
         BEGIN \
           INSERT INTO {ns_table} AS n (namespace, max_worker_id, next_id) \
             VALUES (p_ns, p_max, 0) \
             ON CONFLICT (namespace) DO UPDATE SET next_id = n.next_id \
             RETURNING n.max_worker_id, n.next_id INTO v_stored, v_next; \
           IF v_stored <> p_max THEN \
             RETURN QUERY SELECT 'mismatch'::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, v_stored; \
             RETURN; \
           END IF; \
           SELECT l.worker_id, l.fence, l.watermark INTO v_id, v_fence, v_mark FROM {table} l \
             WHERE l.namespace = p_ns AND l.expires_at <= {now} \
             ORDER BY l.expires_at LIMIT 1 FOR UPDATE; \
           IF FOUND THEN \
             UPDATE {table} l SET token = p_token, expires_at = {now} + p_ttl, fence = v_fence + 1 \
               WHERE l.namespace = p_ns AND l.worker_id = v_id; \
             RETURN QUERY SELECT 'ok'::TEXT, v_id, v_fence + 1, v_mark, v_stored; \
             RETURN; \
           END IF; \
           IF v_next <= p_max THEN \
             INSERT INTO {table} (namespace, worker_id, token, expires_at, fence, watermark) \
               VALUES (p_ns, v_next, p_token, {now} + p_ttl, 1, p_zero); \
             UPDATE {ns_table} n SET next_id = n.next_id + 1 WHERE n.namespace = p_ns; \
             RETURN QUERY SELECT 'ok'::TEXT, v_next, 1::BIGINT, p_zero, v_stored; \
             RETURN; \
           END IF; \
           RETURN QUERY SELECT 'full'::TEXT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, v_stored; \
         END $fn$"
    )
}

/// The call, with `$1..$5` placeholders: namespace, max_worker_id, token,
/// ttl in µs, the stored form of watermark zero.
pub(crate) fn call(table: &str) -> String {
    format!(
        "SELECT r_status, r_id, r_fence, r_watermark, r_stored FROM {}($1, $2, $3, $4, $5)",
        function_name(table)
    )
}

impl SqlStore {
    /// Acquire through the function: one round trip. The outer error is the
    /// database's, the inner one the contract's answer.
    pub(crate) async fn acquire_by_function(
        &self,
        call: &str,
        namespace: &str,
        max_worker_id: u32,
        token: &str,
        ttl_us: i64,
    ) -> sqlx::Result<workerid_core::Result<Grant>> {
        let row = q(call)
            .bind(namespace.to_string())
            .bind(i64::from(max_worker_id))
            .bind(token.to_string())
            .bind(ttl_us)
            .bind(watermark_to_sql(0))
            .fetch_one(self.pool())
            .await?;
        let status: String = row.try_get(0)?;
        let (id, fence, watermark, stored): (Option<i64>, Option<i64>, Option<i64>, i64) = (
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
            row.try_get(4)?,
        );
        let corrupt = || {
            Error::unavailable(
                "postgres",
                format!("unexpected acquire answer: {status} {id:?} {fence:?} {stored}"),
            )
        };
        Ok(match (status.as_str(), id, fence, watermark) {
            ("ok", Some(id), Some(fence), Some(watermark)) => {
                match (u32::try_from(id), u64::try_from(fence)) {
                    (Ok(id), Ok(fence)) => Ok(Grant {
                        id: WorkerId::from(id),
                        fence,
                        previous_watermark: watermark_from_sql(watermark),
                    }),
                    _ => Err(corrupt()),
                }
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
