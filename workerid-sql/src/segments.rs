//! Segment counters in SQL: go-id-alloc's and Leaf's `segments` table, as
//! their servers create and use it, with a `version` column that every
//! reservation bumps and a give-back compares (or, kept without it, no
//! give-backs), and CHECKs that keep a hand-written row from making a bad
//! range.

use async_trait::async_trait;
use sqlx::Row;
use workerid_segment::{Error, Result};
use workerid_segment::{Range, SegmentStore, Tag, TagInfo, MAX_SEGMENT_ID};

use crate::dialect::Dialect;
use crate::store::{q, retrying, SqlStore};

/// The statements of the segment table (built once per store from the
/// validated table name).
#[derive(Debug)]
pub(crate) struct SegmentStatements {
    /// Whether the table has the version column and give-backs are on.
    pub versioned: bool,
    pub schema: String,
    /// Binds: tag, max_id, step. Affects 1 row when created.
    pub create: String,
    /// Adds the version column to a table made without it.
    pub add_version: String,
    /// Reads nothing, and fails when the version column is missing.
    pub has_version: String,
    /// Binds: step?, tag, limit, step?, then step? where the database has
    /// RETURNING (it returns `max_id, used step, version`).
    pub reserve: String,
    /// MySQL: `SELECT max_id, step, version` after the update, in the same
    /// transaction. Binds: tag.
    pub read_max: String,
    /// Binds: new_max, tag, expected max, expected version.
    pub give_back: String,
    pub exists: String,
    pub list: String,
}

impl SegmentStatements {
    pub(crate) fn new(dialect: Dialect, table: &str, versioned: bool) -> SegmentStatements {
        let tag_col = dialect.ascii(32);
        let int = dialect.bigint_cast();
        // go-id-alloc's column as its README creates it; PostgreSQL and
        // SQLite have no ON UPDATE, and every reservation sets it anyway.
        let update_time = match dialect {
            Dialect::MySql => "DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP",
            Dialect::Postgres => "TIMESTAMP DEFAULT CURRENT_TIMESTAMP",
            Dialect::Sqlite => "DATETIME DEFAULT CURRENT_TIMESTAMP",
        };
        let (version_column, bump, version) = if versioned {
            (
                ", version BIGINT NOT NULL DEFAULT 0",
                "version = version + 1, ",
                "version",
            )
        } else {
            ("", "", "0")
        };
        let returning = if dialect == Dialect::MySql {
            String::new()
        } else {
            format!(" RETURNING max_id, CAST(COALESCE(?, step) AS {int}), CAST({version} AS {int})")
        };
        let create = match dialect {
            Dialect::MySql => {
                format!("INSERT IGNORE INTO {table} (biz_tag, max_id, step) VALUES (?, ?, ?)")
            }
            _ => format!(
                "INSERT INTO {table} (biz_tag, max_id, step) VALUES (?, ?, ?) \
                 ON CONFLICT (biz_tag) DO NOTHING"
            ),
        };
        let p = |sql: String| dialect.placeholders(&sql);
        SegmentStatements {
            versioned,
            schema: format!(
                "CREATE TABLE IF NOT EXISTS {table} (\
                 biz_tag {tag_col} NOT NULL PRIMARY KEY, \
                 max_id BIGINT NOT NULL CHECK (max_id >= 0), \
                 step BIGINT NOT NULL CHECK (step > 0), \
                 description VARCHAR(1024) NOT NULL DEFAULT '', \
                 update_time {update_time}{version_column})"
            ),
            add_version: format!(
                "ALTER TABLE {table} ADD COLUMN version BIGINT NOT NULL DEFAULT 0"
            ),
            has_version: format!("SELECT version FROM {table} WHERE 1 = 0"),
            create: p(create),
            reserve: p(format!(
                "UPDATE {table} SET max_id = max_id + COALESCE(?, step), \
                 {bump}update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = ? AND max_id <= ? - COALESCE(?, step){returning}"
            )),
            read_max: p(format!(
                "SELECT max_id, CAST(step AS {int}), CAST({version} AS {int}) FROM {table} \
                 WHERE biz_tag = ?"
            )),
            give_back: p(format!(
                "UPDATE {table} SET max_id = ?, version = version + 1 \
                 WHERE biz_tag = ? AND max_id = ? AND version = ?"
            )),
            exists: p(format!("SELECT 1 FROM {table} WHERE biz_tag = ?")),
            list: format!(
                "SELECT biz_tag, CAST(max_id AS {int}), CAST(step AS {int}) FROM {table} \
                 ORDER BY biz_tag"
            ),
        }
    }
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The range a reservation's row describes, checked: `used` long (the step
/// asked for, if any), `[max - used, max)` never below 0, within
/// [`MAX_SEGMENT_ID`]. A row that breaks this (a step of 0 or below written
/// by hand, a max moved back) makes no range at all.
fn checked_range(max: i64, used: i64, asked: Option<i64>, version: i64) -> Result<Range, String> {
    if used < 1 || asked.is_some_and(|asked| asked != used) {
        return Err(format!(
            "the row's step is {used} where {} was reserved",
            asked.map_or_else(|| "a positive step".to_string(), |a| a.to_string())
        ));
    }
    let range = u64::try_from(max)
        .ok()
        .and_then(|max| Range::below(max, used as u64, version as u64));
    let Some(range) = range else {
        return Err(format!(
            "max_id {max} minus the step {used} is below 0: the row was moved back"
        ));
    };
    if range.end() > MAX_SEGMENT_ID {
        return Err(format!(
            "max_id {max} is past the largest ID {MAX_SEGMENT_ID}"
        ));
    }
    Ok(range)
}

impl SqlStore {
    /// Why a reservation matched nothing: an unknown or an exhausted tag.
    async fn reserve_refused(&self, tag: &Tag) -> Error {
        let found = q(&self.segments().exists)
            .bind(tag.to_string())
            .fetch_optional(self.pool())
            .await;
        match found {
            Ok(None) => Error::UnknownTag {
                tag: tag.to_string(),
            },
            Ok(Some(_)) => Error::TagExhausted {
                tag: tag.to_string(),
            },
            Err(e) => self.unavailable(e).into(),
        }
    }
}

#[async_trait]
impl SegmentStore for SqlStore {
    fn segment_capabilities(&self) -> workerid_segment::SegmentCapabilities {
        workerid_segment::SegmentCapabilities {
            durable: workerid_core::LeaseStore::capabilities(self).durable,
            give_back: self.segments().versioned,
            list: true,
            ..Default::default()
        }
    }

    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let done = q(&self.segments().create)
            .bind(tag.to_string())
            .bind(as_i64(first_id))
            .bind(as_i64(step))
            .execute(self.pool())
            .await
            .map_err(|e| self.unavailable(e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let s = self.segments();
        let step = step.map(as_i64);
        let limit = as_i64(MAX_SEGMENT_ID);
        let (max, used, version): (i64, i64, i64) = if self.dialect() == Dialect::MySql {
            let tag_text = tag.to_string();
            let reserved = retrying(|| async {
                let mut conn = self.connection_for_transaction().await?;
                let mut tx = sqlx::Acquire::begin(&mut conn).await?;
                let done = q(&s.reserve)
                    .bind(step)
                    .bind(tag_text.clone())
                    .bind(limit)
                    .bind(step)
                    .execute(&mut *tx)
                    .await?;
                if done.rows_affected() != 1 {
                    return Ok(None);
                }
                let row = q(&s.read_max)
                    .bind(tag_text.clone())
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                let default: i64 = row.try_get(1)?;
                let max = row.try_get::<i64, _>(0)?;
                Ok(Some((
                    max,
                    step.unwrap_or(default),
                    row.try_get::<i64, _>(2)?,
                )))
            })
            .await
            .map_err(|e| self.unavailable(e))?;
            match reserved {
                Some(reserved) => reserved,
                None => return Err(self.reserve_refused(tag).await),
            }
        } else {
            let query = q(&s.reserve)
                .bind(step)
                .bind(tag.to_string())
                .bind(limit)
                .bind(step)
                .bind(step);
            let row = crate::committed::first_row(query, self.pool())
                .await
                .map_err(|e| self.unavailable(e))?;
            let Some(row) = row else {
                return Err(self.reserve_refused(tag).await);
            };
            let read = |i| row.try_get::<i64, _>(i).map_err(|e| self.unavailable(e));
            (read(0)?, read(1)?, read(2)?)
        };
        checked_range(max, used, step, version).map_err(|reason| {
            Error::unavailable(
                self.store_name(),
                format!(
                    "tag {tag}: no range reserved, the segment table is inconsistent: {reason}"
                ),
            )
        })
    }

    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        let refused = new_max > reserved.end() || !self.segments().versioned;
        let done = if refused {
            0
        } else {
            q(&self.segments().give_back)
                .bind(as_i64(new_max))
                .bind(tag.to_string())
                .bind(as_i64(reserved.end()))
                .bind(as_i64(reserved.version))
                .execute(self.pool())
                .await
                .map_err(|e| self.unavailable(e))?
                .rows_affected()
        };
        if done == 1 {
            return Ok(true);
        }
        // Refused: an unknown tag says so.
        match self.reserve_refused(tag).await {
            Error::UnknownTag { tag } => Err(Error::UnknownTag { tag }),
            Error::TagExhausted { .. } => Ok(false),
            e => Err(e),
        }
    }

    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        let rows = q(&self.segments().list)
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.unavailable(e))?;
        let mut tags = Vec::with_capacity(rows.len());
        let (mut skipped, mut first_skipped) = (0, None);
        for row in &rows {
            let name: String = row.try_get(0).map_err(|e| self.unavailable(e))?;
            let max_id: i64 = row.try_get(1).map_err(|e| self.unavailable(e))?;
            let step: i64 = row.try_get(2).map_err(|e| self.unavailable(e))?;
            // A table shared with Leaf may hold longer names (its column is
            // 128 bytes wide): they are not tags this store can serve.
            match Tag::new(name.as_str()) {
                Ok(tag) => tags.push(TagInfo {
                    tag,
                    max_id: max_id as u64,
                    step: step as u64,
                }),
                Err(_) => {
                    skipped += 1;
                    first_skipped.get_or_insert(name);
                }
            }
        }
        self.skipped_rows(skipped, first_skipped.as_deref());
        Ok(tags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked() {
        let range = checked_range(110, 10, Some(10), 3).unwrap();
        assert_eq!((range.first, range.last, range.version), (100, 109, 3));
        assert_eq!(checked_range(10, 10, None, 1).unwrap().first, 0);
        for (max, used, asked) in [
            (110, 0, None),
            (110, -5, None),
            (110, 9, Some(10)),
            (5, 10, None),
            (-1, 1, None),
        ] {
            assert!(
                checked_range(max, used, asked, 1).is_err(),
                "{max} {used} {asked:?}"
            );
        }
    }
}
