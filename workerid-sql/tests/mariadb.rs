//! The conformance suite on a real MariaDB server (started once for this test
//! binary, or the MySQL/MariaDB server `WORKERID_MYSQL_URL` names).

mod support;

workerid_conformance::lease_store_tests!(support::Database {
    url: workerid_testkit::mariadb::shared_url()
});

workerid_conformance::segment_store_tests!(support::Database {
    url: workerid_testkit::mariadb::shared_url()
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_renew_in_one_namespace_without_error() {
    support::renewal_storm(&workerid_testkit::mariadb::shared_url()).await;
}

/// Acquire is one round trip: the store creates its stored procedure, and a
/// database user without the privilege to create it still gets a working
/// store (acquire then runs its transaction statement by statement).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_uses_a_procedure_and_works_without_the_privilege_for_it() {
    use sqlx::Row;
    use workerid_core::{Allocator, LeaseOptions};
    use workerid_sql::SqlStore;

    let url = workerid_testkit::mariadb::shared_url();
    let admin = SqlStore::builder()
        .table("proc_check")
        .connect(&url)
        .await
        .expect("connect");
    let found = sqlx::query(
        "SELECT COUNT(*) FROM information_schema.ROUTINES \
         WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME LIKE 'proc\\_check\\_acquire\\_%'",
    )
    .fetch_one(admin.pool())
    .await
    .expect("information_schema")
    .try_get::<i64, _>(0)
    .expect("count");
    assert_eq!(found, 1, "the acquire procedure exists");

    // A user who may use tables but not create routines.
    let user = format!("limited{}", rand::random::<u32>());
    let database: String = sqlx::query("SELECT DATABASE()")
        .fetch_one(admin.pool())
        .await
        .expect("database")
        .try_get(0)
        .expect("name");
    for statement in [
        format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"),
        format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, INDEX ON `{database}`.* TO '{user}'@'%'"
        ),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(admin.pool())
            .await
            .expect("create the limited user");
    }
    let limited_url = limited(&url, &user);
    let store = SqlStore::builder()
        .table("no_proc")
        .connect(&limited_url)
        .await
        .expect("a user without CREATE ROUTINE still connects");
    let options = LeaseOptions::new().worker_bits(2);
    let allocator = Allocator::new(store, "limited", options).expect("allocator");
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(
            allocator
                .acquire()
                .await
                .expect("acquire without the procedure"),
        );
    }
    let mut ids: Vec<u32> = held.iter().map(|l| l.id().get()).collect();
    ids.sort();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    assert!(allocator.acquire().await.is_err(), "the pool of 4 is full");
}

/// A user granted only Leaf's table (SELECT, UPDATE), as Leaf's servers
/// run: a read-only open lists its tags; a full open is refused in the
/// driver's words for a missing grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_granted_only_the_segment_table_reads_it() {
    use workerid_segment::SegmentStore;
    use workerid_sql::SqlStore;

    let url = workerid_testkit::mariadb::shared_url();
    let admin = SqlStore::builder().connect(&url).await.expect("connect");
    let suffix = rand::random::<u32>();
    let (table, user) = (format!("leaf_alloc_{suffix:08x}"), format!("leaf{suffix}"));
    let database: String = sqlx::Row::try_get(
        &sqlx::query("SELECT DATABASE()")
            .fetch_one(admin.pool())
            .await
            .expect("database"),
        0,
    )
    .expect("name");
    for statement in [
        format!(
            "CREATE TABLE {table} (biz_tag VARCHAR(128) NOT NULL PRIMARY KEY, \
             max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, \
             description VARCHAR(256) DEFAULT NULL, \
             update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP)"
        ),
        format!("INSERT INTO {table} (biz_tag, max_id, step) VALUES ('leaf-default', 1, 2000)"),
        format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"),
        format!("GRANT SELECT, UPDATE ON `{database}`.`{table}` TO '{user}'@'%'"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(admin.pool())
            .await
            .expect("Leaf's table and user");
    }
    let leaf_url = limited(&url, &user);
    let reader = SqlStore::builder()
        .segments_table(table.clone())
        .segment_versions(false)
        .create_tables(false)
        .connect(&leaf_url)
        .await
        .expect("a read-only open with the segment table alone");
    let tags = reader.list_tags().await.expect("the tags");
    assert_eq!(tags.len(), 1, "{tags:?}");
    assert_eq!(tags[0].tag.as_str(), "leaf-default");

    // A full open would create the lease tables: the driver's words, which
    // `workerid::open` reads as access denied.
    let refused = SqlStore::builder()
        .segments_table(table)
        .segment_versions(false)
        .connect(&leaf_url)
        .await
        .map(|_| ())
        .expect_err("no CREATE grant");
    assert!(
        refused.to_string().contains("command denied to user"),
        "{refused}"
    );
}

/// `url` with the user and password replaced.
fn limited(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}:pw@{host}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_segment_rows_are_refused() {
    support::bad_segment_rows_are_refused(&workerid_testkit::mariadb::shared_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_table_kept_as_it_is() {
    support::a_segment_table_kept_as_it_is(&workerid_testkit::mariadb::shared_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alter_behind_a_held_table_gives_up_in_time() {
    support::an_alter_behind_a_held_table_gives_up_in_time(&workerid_testkit::mariadb::shared_url())
        .await;
}

/// Acquirers racing for released IDs never deadlock: the procedure's first
/// look in its transaction can leave a row locked that it passed over, and
/// the call then waits for the namespace's row, whose holder must not wait
/// for that lock in turn. The contention scenario five times; the server
/// counts every deadlock it broke (`Innodb_deadlocks`, for the whole
/// server: no other test of this binary deadlocks either).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_racing_for_released_ids_never_deadlock() {
    use sqlx::Row;

    let url = workerid_testkit::mariadb::shared_url();
    let admin = workerid_sql::SqlStore::connect(&url)
        .await
        .expect("connect");
    let deadlocks = || async {
        let row = sqlx::query("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
            .fetch_one(admin.pool())
            .await
            .expect("read the deadlock count");
        let count: String = row.try_get(1).expect("its value");
        count.parse::<u64>().expect("a count")
    };
    let before = deadlocks().await;
    support::race_for_released_ids(&url).await;
    assert_eq!(
        deadlocks().await - before,
        0,
        "acquires racing for released IDs deadlocked"
    );
}
