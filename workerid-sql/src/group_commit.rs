//! Group commit for SQLite: concurrent renewals and releases of one store
//! handle share one write transaction, and so one WAL sync.
//!
//! SQLite has one writer per database file, and with `synchronous = FULL`
//! each commit syncs the WAL: one statement per transaction caps a store at
//! the disk's sync rate (a few thousand a second). Here a statement is
//! queued; whoever takes the writer lock next runs everything queued (up to
//! [`MAX_BATCH`]) between `BEGIN IMMEDIATE` and `COMMIT`, and only then
//! answers each caller, so a success is durable before it is told. Each
//! statement keeps its own guard (`WHERE token = ? AND expires_at > now`)
//! and its own answer; a batch that fails answers every statement in it
//! with the error, and nothing in it took effect (or, for an error at
//! `COMMIT`, nothing is known: `Unavailable`, which the caller may retry).
//! A statement whose caller stopped waiting before its batch began is
//! dropped, never run late.

use std::sync::{Arc, Mutex};

use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AnyConnection, AnyPool, Connection};
use tokio::sync::oneshot;

/// A statement with its values bound.
pub(crate) type Statement = Query<'static, Any, AnyArguments>;

/// Makes the statement: once per attempt, since running one consumes it.
pub(crate) type MakeStatement = Box<dyn Fn() -> Statement + Send + Sync>;

/// The most statements one transaction carries: bounds how long the writer
/// lock is held and how long the first caller in a batch waits.
pub(crate) const MAX_BATCH: usize = 512;

/// Why a queued statement has no row count.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum BatchError {
    /// The database refused the batch's transaction (the message is the
    /// database's).
    #[error("{0}")]
    Database(Arc<str>),
    /// The task running the batch ended before it answered (its runtime shut
    /// down): whether the statement took effect is not known.
    #[error("the group commit carrying this statement ended before it answered")]
    Lost,
}

struct Pending {
    statement: MakeStatement,
    answer: oneshot::Sender<Result<u64, BatchError>>,
}

/// The queue and the writer lock of one store handle (shared by its clones).
#[derive(Default)]
pub(crate) struct GroupCommit {
    queue: Mutex<Vec<Pending>>,
    writer: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// Runs `statement` in the next batch and answers the rows it changed.
    ///
    /// The batch runs on a task of its own, so a caller that stops waiting
    /// (a timeout) does not cancel the statements of the others.
    ///
    /// # Errors
    /// [`BatchError::Database`] when the batch's transaction failed;
    /// [`BatchError::Lost`] when its task ended without answering.
    pub(crate) async fn execute(
        &self,
        pool: &AnyPool,
        statement: MakeStatement,
    ) -> Result<u64, BatchError> {
        let (answer, mut answered) = oneshot::channel();
        self.lock_queue().push(Pending { statement, answer });
        loop {
            tokio::select! {
                biased;
                rows = &mut answered => return rows.unwrap_or(Err(BatchError::Lost)),
                writer = self.writer.clone().lock_owned() => {
                    let batch = self.take_batch();
                    // Empty: a batch that was running took ours, and its
                    // answer is on the way.
                    if !batch.is_empty() {
                        tokio::spawn(commit(pool.clone(), batch, writer));
                    }
                }
            }
        }
    }

    /// The next batch: up to [`MAX_BATCH`] statements whose callers still
    /// wait (a caller that gave up has been told it failed; running its
    /// statement later, when another caller comes, would renew a lease its
    /// holder gave up on).
    fn take_batch(&self) -> Vec<Pending> {
        let mut queue = self.lock_queue();
        let n = queue.len().min(MAX_BATCH);
        queue.drain(..n).filter(|p| !p.answer.is_closed()).collect()
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        // A panic while the queue was locked left it whole: a push or a drain.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs `batch` in one transaction and answers each statement; holds the
/// writer lock until every answer is sent.
async fn commit(pool: AnyPool, batch: Vec<Pending>, _writer: tokio::sync::OwnedMutexGuard<()>) {
    let (statements, answers): (Vec<_>, Vec<_>) =
        batch.into_iter().map(|p| (p.statement, p.answer)).unzip();
    match run(&pool, statements).await {
        Ok(rows) => {
            for (answer, rows) in answers.into_iter().zip(rows) {
                // A caller that stopped waiting needs no answer.
                let _ = answer.send(Ok(rows));
            }
        }
        Err(e) => {
            tracing::debug!(statements = answers.len(), "group commit failed: {e}");
            let e = BatchError::Database(e.to_string().into());
            for answer in answers {
                let _ = answer.send(Err(e.clone()));
            }
        }
    }
}

async fn run(pool: &AnyPool, statements: Vec<MakeStatement>) -> sqlx::Result<Vec<u64>> {
    if let [statement] = statements.as_slice() {
        // Alone, it commits by itself: one statement, not three. Busy past
        // SQLite's busy timeout, nothing has run: it is tried again.
        let done = crate::store::retrying(|| statement().execute(pool)).await?;
        return Ok(vec![done.rows_affected()]);
    }
    let mut conn = pool.acquire().await?;
    let rows = in_one_transaction(&mut conn, &statements).await;
    if rows.is_err() {
        // SQLite may have rolled back by itself: see
        // `SqlStore::after_transaction`.
        conn.close_on_drop();
    }
    rows
}

async fn in_one_transaction(
    conn: &mut AnyConnection,
    statements: &[MakeStatement],
) -> sqlx::Result<Vec<u64>> {
    // IMMEDIATE takes the write lock at once, so SQLite's busy timeout
    // applies to it (a deferred transaction upgrading to a write can fail
    // at once instead).
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let mut rows = Vec::with_capacity(statements.len());
    for statement in statements {
        rows.push(statement().execute(&mut *tx).await?.rows_affected());
    }
    tx.commit().await?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::any::AnyPoolOptions;

    use super::*;
    use crate::store::q;

    async fn pool(dir: &tempfile::TempDir, max_connections: u32) -> AnyPool {
        sqlx::any::install_default_drivers();
        let url = workerid_testkit::sqlite_url(&dir.path().join("g.db"));
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections)
            .connect(&url)
            .await
            .unwrap();
        q("PRAGMA journal_mode=WAL").execute(&pool).await.unwrap();
        q("CREATE TABLE t (k INTEGER PRIMARY KEY)")
            .execute(&pool)
            .await
            .unwrap();
        pool
    }

    fn insert(k: i64) -> MakeStatement {
        Box::new(move || q("INSERT INTO t (k) VALUES (?)").bind(k))
    }

    async fn rows(pool: &AnyPool) -> i64 {
        sqlx::Row::get(
            &q("SELECT COUNT(*) FROM t").fetch_one(pool).await.unwrap(),
            0,
        )
    }

    /// Starts a caller per statement while the writer lock is held
    /// elsewhere, and waits until all of them are queued (after any queued
    /// before).
    async fn queued(
        group: &Arc<GroupCommit>,
        pool: &AnyPool,
        statements: Vec<MakeStatement>,
    ) -> Vec<tokio::task::JoinHandle<Result<u64, BatchError>>> {
        let n = group.lock_queue().len() + statements.len();
        let callers = statements
            .into_iter()
            .map(|s| {
                let (group, pool) = (group.clone(), pool.clone());
                tokio::spawn(async move { group.execute(&pool, s).await })
            })
            .collect();
        while group.lock_queue().len() < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        callers
    }

    /// Queues `statements` together (the writer lock held meanwhile), lets
    /// them run and answers each.
    async fn one_batch(
        group: &Arc<GroupCommit>,
        pool: &AnyPool,
        statements: Vec<MakeStatement>,
    ) -> Vec<Result<u64, BatchError>> {
        let held = group.writer.clone().lock_owned().await;
        let callers = queued(group, pool, statements).await;
        drop(held);
        let mut answers = Vec::new();
        for caller in callers {
            answers.push(caller.await.unwrap());
        }
        answers
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_queued_together_share_one_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, 2).await;
        let group = Arc::new(GroupCommit::default());
        // 99 good inserts and one that breaks the primary key: if they share
        // one transaction, none of them lands.
        let mut statements: Vec<_> = (0..99).map(insert).collect();
        statements.push(insert(7));
        for answer in one_batch(&group, &pool, statements).await {
            assert!(
                matches!(&answer, Err(BatchError::Database(m)) if m.contains("UNIQUE")),
                "{answer:?}"
            );
        }
        assert_eq!(rows(&pool).await, 0);

        // The next batch is a transaction of its own and commits.
        for answer in one_batch(&group, &pool, (0..100).map(insert).collect()).await {
            assert_eq!(answer.unwrap(), 1);
        }
        assert_eq!(rows(&pool).await, 100);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_carries_at_most_max_batch_statements() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, 2).await;
        let group = Arc::new(GroupCommit::default());
        let held = group.writer.clone().lock_owned().await;
        let mut callers = queued(&group, &pool, (0..MAX_BATCH as i64).map(insert).collect()).await;
        // Queued last, one past MAX_BATCH, and breaking the key: only its
        // own batch fails.
        callers.extend(queued(&group, &pool, vec![insert(0)]).await);
        drop(held);
        let mut failed = 0;
        for caller in callers {
            if caller.await.unwrap().is_err() {
                failed += 1;
            }
        }
        assert_eq!(
            failed, 1,
            "the statement past MAX_BATCH runs in a batch of its own"
        );
        assert_eq!(rows(&pool).await, MAX_BATCH as i64);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_under_way_outlives_its_callers() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, 2).await;
        let group = Arc::new(GroupCommit::default());
        // Another connection holds SQLite's write lock, so the batch waits
        // inside its BEGIN IMMEDIATE.
        let mut blocker = pool.acquire().await.unwrap();
        q("BEGIN IMMEDIATE").execute(&mut *blocker).await.unwrap();
        let held = group.writer.clone().lock_owned().await;
        let callers = queued(&group, &pool, (0..10).map(insert).collect()).await;
        drop(held);
        while !group.lock_queue().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Every caller leaves, the one that started the batch too.
        for caller in callers {
            caller.abort();
            assert!(caller.await.unwrap_err().is_cancelled());
        }
        q("COMMIT").execute(&mut *blocker).await.unwrap();
        drop(blocker);
        let mut landed = 0;
        for _ in 0..1000 {
            landed = rows(&pool).await;
            if landed == 10 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            landed, 10,
            "the batch commits though no caller waits for it"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_whose_caller_left_before_its_batch_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir, 2).await;
        let group = Arc::new(GroupCommit::default());
        let held = group.writer.clone().lock_owned().await;
        for caller in queued(&group, &pool, (0..5).map(insert).collect()).await {
            caller.abort();
            assert!(caller.await.unwrap_err().is_cancelled());
        }
        let staying = queued(&group, &pool, vec![insert(100)]).await;
        drop(held);
        for caller in staying {
            assert_eq!(caller.await.unwrap().unwrap(), 1);
        }
        assert_eq!(
            rows(&pool).await,
            1,
            "the statements of callers that left are dropped"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_batch_leaves_the_next_one_working() {
        let dir = tempfile::tempdir().unwrap();
        // One connection, which the failed batch must not leave unusable.
        let pool = pool(&dir, 1).await;
        // Inserting -1 makes SQLite roll back the whole transaction itself.
        q("CREATE TRIGGER boom BEFORE INSERT ON t WHEN NEW.k = -1 \
           BEGIN SELECT RAISE(ROLLBACK, 'boom'); END")
        .execute(&pool)
        .await
        .unwrap();
        let group = Arc::new(GroupCommit::default());
        for answer in one_batch(&group, &pool, vec![insert(1), insert(-1)]).await {
            assert!(
                matches!(&answer, Err(BatchError::Database(m)) if m.contains("boom")),
                "{answer:?}"
            );
        }
        for answer in one_batch(&group, &pool, vec![insert(1), insert(2)]).await {
            assert_eq!(answer.unwrap(), 1);
        }
        assert_eq!(rows(&pool).await, 2);
    }
}
