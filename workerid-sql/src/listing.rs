//! The operator's methods: list a namespace (one statement), force a release
//! (one guarded `UPDATE`).

use std::time::Duration;

use sqlx::any::AnyRow;
use sqlx::pool::PoolConnection;
use sqlx::{Any, Row};
use workerid_core::{
    Error, Holder, LeaseInfo, LeaseState, Listing, Namespace, NamespaceInfo, Result, WorkerId,
};

use crate::store::{q, retrying, watermark_from_sql, SqlStore};

/// One row of the listing: `max_worker_id`, then the lease (NULL for a
/// namespace without leases), the database's clock and the lease's holder.
type ListRow = (
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<String>,
);

fn read(row: &AnyRow) -> sqlx::Result<ListRow> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
    ))
}

fn micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

/// The listing of `rows` (none: a namespace never used).
fn listing(rows: &[ListRow]) -> Result<Listing> {
    let Some(&(max, ..)) = rows.first() else {
        return Ok(Listing::unknown());
    };
    let corrupt = |what: String| Error::unavailable("sql", format!("corrupt row: {what}"));
    let max_worker_id = u32::try_from(max).map_err(|_| corrupt(format!("max_worker_id {max}")))?;
    let mut leases = Vec::with_capacity(rows.len());
    for (_, id, token, expires_at, fence, watermark, now, holder) in rows {
        let (Some(id), Some(expires_at), Some(fence), Some(watermark), Some(holder)) =
            (id, expires_at, fence, watermark, holder)
        else {
            continue; // the namespace has no lease yet
        };
        let id = u32::try_from(*id).map_err(|_| corrupt(format!("worker_id {id}")))?;
        let fence = u64::try_from(*fence).map_err(|_| corrupt(format!("fence {fence}")))?;
        let holder =
            Holder::new(holder.as_str()).map_err(|_| corrupt(format!("holder {holder:?}")))?;
        leases.push(LeaseInfo {
            id: WorkerId::from(id),
            state: LeaseState::judge(token.is_some(), micros(*expires_at), micros(*now)),
            fence,
            watermark: watermark_from_sql(*watermark),
            holder,
        });
    }
    leases.sort_unstable_by_key(|l| l.id);
    Ok(Listing {
        max_worker_id: Some(max_worker_id),
        leases,
    })
}

impl SqlStore {
    pub(crate) async fn list_namespace(&self, namespace: &Namespace) -> Result<Listing> {
        let rows = q(&self.statements().list)
            .bind(namespace.to_string())
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.unavailable(e))?;
        let rows = rows
            .iter()
            .map(read)
            .collect::<sqlx::Result<Vec<_>>>()
            .map_err(|e| self.unavailable(e))?;
        listing(&rows)
    }

    pub(crate) async fn namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        let rows = q(&self.statements().list_namespaces)
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.unavailable(e))?;
        let corrupt = |what: String| Error::unavailable("sql", format!("corrupt row: {what}"));
        let mut all = Vec::with_capacity(rows.len());
        for row in &rows {
            let (name, max, live): (String, i64, i64) =
                (|| Ok::<_, sqlx::Error>((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))()
                    .map_err(|e| self.unavailable(e))?;
            all.push(NamespaceInfo {
                namespace: Namespace::new(name.as_str())
                    .map_err(|_| corrupt(format!("namespace {name:?}")))?,
                max_worker_id: u32::try_from(max)
                    .map_err(|_| corrupt(format!("max_worker_id {max}")))?,
                live: u32::try_from(live).map_err(|_| corrupt(format!("live count {live}")))?,
            });
        }
        // Byte order, whatever the database's collation.
        all.sort_by(|a, b| a.namespace.as_str().cmp(b.namespace.as_str()));
        Ok(all)
    }

    /// Removes the namespace in one transaction that locks its row (an
    /// acquire's full path waits; its fast path finds no free row left).
    pub(crate) async fn remove_namespace_rows(&self, namespace: &Namespace) -> Result<bool> {
        let removed = retrying(|| self.remove_tx(namespace.as_str()))
            .await
            .map_err(|e| self.unavailable(e))?;
        match removed {
            None => Ok(false),
            Some(0) => Ok(true),
            Some(live) => Err(Error::NamespaceInUse {
                namespace: namespace.to_string(),
                live: u32::try_from(live).unwrap_or(u32::MAX),
            }),
        }
    }

    /// None: never used; Some(0): removed; Some(n): n live leases, nothing
    /// changed.
    async fn remove_tx(&self, namespace: &str) -> sqlx::Result<Option<i64>> {
        let mut conn = self.connection_for_transaction().await?;
        let answer = self.remove_on(&mut conn, namespace).await;
        self.after_transaction(&mut conn, answer.is_ok());
        answer
    }

    async fn remove_on(
        &self,
        conn: &mut PoolConnection<Any>,
        namespace: &str,
    ) -> sqlx::Result<Option<i64>> {
        let s = self.statements();
        let mut tx = self.begin_write(conn).await?;
        let known = q(&s.remove_lock)
            .bind(namespace.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        if known.is_none() {
            tx.rollback().await?;
            return Ok(None);
        }
        q(&s.remove_not_live)
            .bind(namespace.to_string())
            .execute(&mut *tx)
            .await?;
        let left: i64 = q(&s.remove_count_left)
            .bind(namespace.to_string())
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        if left > 0 {
            tx.rollback().await?;
            return Ok(Some(left));
        }
        q(&s.remove_namespace)
            .bind(namespace.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(0))
    }

    pub(crate) async fn force_release_id(
        &self,
        namespace: &Namespace,
        id: WorkerId,
    ) -> Result<bool> {
        let statement = || {
            q(&self.statements().force_release)
                .bind(namespace.to_string())
                .bind(i64::from(id.get()))
                .execute(self.pool())
        };
        // A statement rolled back for a deadlock changed nothing: run it again.
        let done = retrying(statement).await.map_err(|e| self.unavailable(e))?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::watermark_to_sql;

    #[test]
    fn rows_make_a_listing() {
        assert_eq!(listing(&[]).unwrap(), Listing::unknown());
        let empty = listing(&[(3, None, None, None, None, None, 10, None)]).unwrap();
        assert_eq!((empty.max_worker_id, empty.leases.len()), (Some(3), 0));
        let w = watermark_to_sql(u64::MAX);
        let rows = [
            (3, Some(2), None, Some(5), Some(4), Some(w), 10, h("c:3")),
            (
                3,
                Some(0),
                Some("t".into()),
                Some(1_000_010),
                Some(1),
                Some(w),
                10,
                h("a:1"),
            ),
            (
                3,
                Some(1),
                Some("t".into()),
                Some(10),
                Some(2),
                Some(w),
                10,
                h("b:2"),
            ),
        ];
        let listing = listing(&rows).unwrap();
        let states: Vec<_> = listing.leases.iter().map(|l| l.state).collect();
        assert_eq!(
            states,
            [
                LeaseState::Live {
                    remaining: Duration::from_secs(1)
                },
                LeaseState::Expired,
                LeaseState::Free
            ]
        );
        assert_eq!(listing.leases[2].fence, 4);
        assert_eq!(listing.leases[2].watermark, u64::MAX);
        let holders: Vec<_> = listing.leases.iter().map(|l| l.holder.as_str()).collect();
        assert_eq!(holders, ["a:1", "b:2", "c:3"]);
        let bad = [(
            3,
            Some(0),
            None,
            Some(5),
            Some(4),
            Some(w),
            10,
            h("no space"),
        )];
        assert!(super::listing(&bad).is_err());
    }

    fn h(label: &str) -> Option<String> {
        Some(label.into())
    }
}
