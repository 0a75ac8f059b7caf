//! Segment counters in SQL: the seed's `segments` table.

use async_trait::async_trait;
use sqlx::Row;
use workerid_core::segment::{Range, SegmentStore, Tag, TagInfo, MAX_SEGMENT_ID};
use workerid_core::{Error, Result};

use crate::dialect::Dialect;
use crate::store::{q, SqlStore};

/// The statements of the segment table (built once per store from the
/// validated table name).
#[derive(Debug)]
pub(crate) struct SegmentStatements {
    pub schema: String,
    /// Binds: tag, max_id, step, update_time. Affects 1 row when created.
    pub create: String,
    /// Binds: step?, limit, step?, tag. Returns `max_id, used step` where the
    /// database has RETURNING.
    pub reserve: String,
    /// MySQL: `SELECT max_id, step` after the update, in the same transaction. Binds: tag.
    pub read_max: String,
    /// Binds: new_max, tag, expected.
    pub give_back: String,
    pub exists: String,
    pub list: String,
}

impl SegmentStatements {
    pub(crate) fn new(dialect: Dialect, table: &str) -> SegmentStatements {
        let tag_col = dialect.ascii(32);
        let now = dialect.now_us();
        let returning = if dialect == Dialect::MySql {
            ""
        } else {
            " RETURNING max_id, COALESCE(?, step)"
        };
        let create = match dialect {
            Dialect::MySql => format!(
                "INSERT IGNORE INTO {table} (biz_tag, max_id, step, description, update_time) \
                 VALUES (?, ?, ?, '', ?)"
            ),
            _ => format!(
                "INSERT INTO {table} (biz_tag, max_id, step, description, update_time) \
                 VALUES (?, ?, ?, '', ?) ON CONFLICT (biz_tag) DO NOTHING"
            ),
        };
        let p = |sql: String| dialect.placeholders(&sql);
        SegmentStatements {
            schema: format!(
                "CREATE TABLE IF NOT EXISTS {table} (\
                 biz_tag {tag_col} NOT NULL PRIMARY KEY, \
                 max_id BIGINT NOT NULL, \
                 step BIGINT NOT NULL, \
                 description VARCHAR(1024) NOT NULL DEFAULT '', \
                 update_time BIGINT NOT NULL)"
            ),
            create: p(create),
            reserve: p(format!(
                "UPDATE {table} SET max_id = max_id + COALESCE(?, step), update_time = {now} \
                 WHERE biz_tag = ? AND max_id <= ? - COALESCE(?, step){returning}"
            )),
            read_max: p(format!(
                "SELECT max_id, step FROM {table} WHERE biz_tag = ?"
            )),
            give_back: p(format!(
                "UPDATE {table} SET max_id = ? WHERE biz_tag = ? AND max_id = ?"
            )),
            exists: p(format!("SELECT step FROM {table} WHERE biz_tag = ?")),
            list: format!("SELECT biz_tag, max_id, step FROM {table} ORDER BY biz_tag"),
        }
    }
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
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
            Err(e) => self.unavailable(e),
        }
    }
}

#[async_trait]
impl SegmentStore for SqlStore {
    fn segments_durable(&self) -> bool {
        workerid_core::LeaseStore::capabilities(self).durable
    }

    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        let done = q(&self.segments().create)
            .bind(tag.to_string())
            .bind(as_i64(first_id - 1))
            .bind(as_i64(step))
            .bind(0i64)
            .execute(self.pool())
            .await
            .map_err(|e| self.unavailable(e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        let s = self.segments();
        let step = step.map(as_i64);
        let limit = as_i64(MAX_SEGMENT_ID);
        let (max, used): (i64, i64) = if self.dialect() == Dialect::MySql {
            let tag_text = tag.to_string();
            let reserved = self
                .retrying(|| async {
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
                    Ok(Some((row.try_get::<i64, _>(0)?, step.unwrap_or(default))))
                })
                .await
                .map_err(|e| self.unavailable(e))?;
            match reserved {
                Some(reserved) => reserved,
                None => return Err(self.reserve_refused(tag).await),
            }
        } else {
            let row = q(&s.reserve)
                .bind(step)
                .bind(tag.to_string())
                .bind(limit)
                .bind(step)
                .bind(step)
                .fetch_optional(self.pool())
                .await
                .map_err(|e| self.unavailable(e))?;
            let Some(row) = row else {
                return Err(self.reserve_refused(tag).await);
            };
            let read = |i| row.try_get::<i64, _>(i).map_err(|e| self.unavailable(e));
            (read(0)?, read(1)?)
        };
        let (max, used) = (max as u64, used as u64);
        Ok(Range {
            first: max - used + 1,
            last: max,
        })
    }

    async fn give_back(&self, tag: &Tag, expected_max: u64, new_max: u64) -> Result<bool> {
        if new_max > expected_max {
            return Ok(false);
        }
        let done = q(&self.segments().give_back)
            .bind(as_i64(new_max))
            .bind(tag.to_string())
            .bind(as_i64(expected_max))
            .execute(self.pool())
            .await
            .map_err(|e| self.unavailable(e))?;
        if done.rows_affected() == 1 {
            return Ok(true);
        }
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
        rows.iter()
            .map(|row| {
                let name: String = row.try_get(0).map_err(|e| self.unavailable(e))?;
                let max_id: i64 = row.try_get(1).map_err(|e| self.unavailable(e))?;
                let step: i64 = row.try_get(2).map_err(|e| self.unavailable(e))?;
                Ok(TagInfo {
                    tag: Tag::new(name)?,
                    max_id: max_id as u64,
                    step: step as u64,
                })
            })
            .collect()
    }
}
