//! Statements that change rows and return them in one autocommit step
//! (`UPDATE ... RETURNING`), answered only once they have committed.
//!
//! An autocommit statement commits when it runs to its end: SQLite when
//! the statement steps past its last row, PostgreSQL at the end of the
//! exchange. A commit can still fail then (a full disk, a deferred
//! constraint), which rolls the change back; a caller that took the first
//! row and stopped reading would never see that error, and would answer a
//! grant or a range the store does not hold. Reading every row (there is
//! at most one) reads the statement to its end, and its error with it.

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, AnyPool};

/// Runs `query` to its end on `pool` and answers its first row, if any.
pub(crate) async fn first_row(
    query: sqlx::query::Query<'static, Any, AnyArguments>,
    pool: &AnyPool,
) -> sqlx::Result<Option<AnyRow>> {
    Ok(query.fetch_all(pool).await?.into_iter().next())
}

#[cfg(test)]
mod tests {
    use sqlx::any::AnyPoolOptions;

    use super::*;
    use crate::store::q;

    /// A change whose commit fails (a deferred foreign key, checked at
    /// commit as a full disk is met at commit).
    async fn failing_at_commit() -> (tempfile::TempDir, AnyPool) {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let url = workerid_testkit::sqlite_url(&dir.path().join("c.db"));
        let pool = AnyPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .unwrap();
        for sql in [
            "PRAGMA foreign_keys = ON",
            "CREATE TABLE parent (id INTEGER PRIMARY KEY)",
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER \
             REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)",
            "INSERT INTO parent (id) VALUES (1)",
            "INSERT INTO child (id, parent) VALUES (1, 1)",
        ] {
            q(sql).execute(&pool).await.unwrap();
        }
        (dir, pool)
    }

    const BREAKS_AT_COMMIT: &str = "UPDATE child SET parent = 2 WHERE id = 1 RETURNING parent";

    async fn stored_parent(pool: &AnyPool) -> i64 {
        let row = q("SELECT parent FROM child WHERE id = 1")
            .fetch_one(pool)
            .await
            .unwrap();
        sqlx::Row::get(&row, 0)
    }

    #[tokio::test]
    async fn a_commit_that_fails_is_an_error() {
        let (_dir, pool) = failing_at_commit().await;
        let answer = first_row(q(BREAKS_AT_COMMIT), &pool).await;
        assert!(answer.is_err(), "answered a row: {:?}", answer.is_ok());
        assert_eq!(stored_parent(&pool).await, 1, "rolled back");
    }

    /// Why: the first row alone answers a change that was rolled back.
    #[tokio::test]
    async fn the_first_row_alone_hides_the_failed_commit() {
        let (_dir, pool) = failing_at_commit().await;
        let answer = q(BREAKS_AT_COMMIT).fetch_optional(&pool).await;
        assert!(
            matches!(answer, Ok(Some(_))),
            "fetch_optional saw the failed commit: first_row may no longer be needed"
        );
        assert_eq!(stored_parent(&pool).await, 1, "rolled back all the same");
    }
}
