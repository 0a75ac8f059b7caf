//! Opening PostgreSQL, MySQL, MariaDB and SQLite.

use std::sync::Arc;

use percent_encoding::percent_decode_str;

use super::{connect_error, Opened};
use crate::store_url::StoreUrl;
use crate::{OpenError, OpenOptions, StoreKind};

/// The URL parameters this crate reads itself.
const OWN_PARAMS: [&str; 3] = ["lease_table", "segments_table", "segment_versions"];

/// The parameters sqlx 0.9 reads from a PostgreSQL URL
/// (`PgConnectOptions::parse_from_url`), besides `options[NAME]`. It logs
/// any other, value included, so no other one may reach it.
const POSTGRES_PARAMS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// The parameters sqlx 0.9 reads from a MySQL URL
/// (`MySqlConnectOptions::parse_from_url`); it ignores any other.
const MYSQL_PARAMS: [&str; 14] = [
    "sslmode",
    "ssl-mode",
    "sslca",
    "ssl-ca",
    "charset",
    "collation",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "socket",
    "timezone",
    "time-zone",
];

/// The parameters sqlx 0.9 reads from a SQLite URL
/// (`SqliteConnectOptions::from_db_and_params`).
const SQLITE_PARAMS: [&str; 4] = ["mode", "cache", "immutable", "vfs"];

pub(crate) async fn open(options: &OpenOptions, url: &StoreUrl) -> Result<Opened, OpenError> {
    let (driver_url, own) = split_params(url.kind, &url.raw).map_err(|reason| url.bad(reason))?;
    let mut builder = workerid_sql::SqlStore::builder().create_tables(!options.read_only);
    for (key, value) in own {
        builder = match key.as_str() {
            "lease_table" => builder.table(value),
            "segments_table" => builder.segments_table(value),
            _ => builder.segment_versions(url.boolean(&key, &value)?),
        };
    }
    if let Some(max) = options.max_connections {
        builder = builder.max_connections(max);
    }
    if let Some(timeout) = options.connect_timeout {
        builder = builder.acquire_timeout(timeout);
    }
    let store = builder
        .connect(&driver_url)
        .await
        .map_err(|e| connect_error(url, e))?;
    Ok(Arc::new(store))
}

/// Whether sqlx reads the parameter `name` (decoded) from a URL of `kind`.
fn driver_reads(kind: StoreKind, name: &str) -> bool {
    match kind {
        StoreKind::Postgres => {
            POSTGRES_PARAMS.contains(&name)
                || name
                    .strip_prefix("options[")
                    .is_some_and(|rest| rest.len() > 1 && rest.ends_with(']'))
        }
        StoreKind::MySql => MYSQL_PARAMS.contains(&name),
        StoreKind::Sqlite => SQLITE_PARAMS.contains(&name),
        _ => false,
    }
}

/// `raw` split into the URL for sqlx, which keeps only the parameters sqlx
/// reads for `kind`, and the parameters of [`OWN_PARAMS`], decoded.
/// Names are compared decoded, as sqlx decodes them.
///
/// # Errors
/// The reason for a bad URL: a parameter neither sqlx nor this crate reads,
/// named without its value (which may be a secret).
fn split_params(kind: StoreKind, raw: &str) -> Result<(String, Vec<(String, String)>), String> {
    // sqlx reads everything after SQLite's first '?' as parameters; a
    // server URL's query ends at its fragment, and none comes after one.
    let query_start = match kind {
        StoreKind::Sqlite => raw.find('?'),
        _ => raw
            .find(['?', '#'])
            .filter(|&at| raw[at..].starts_with('?')),
    };
    let Some(query_start) = query_start else {
        return Ok((raw.to_string(), Vec::new()));
    };
    let (base, query) = raw.split_at(query_start);
    let query = &query[1..];
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) if kind != StoreKind::Sqlite => (query, Some(fragment)),
        _ => (query, None),
    };
    let mut own = Vec::new();
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = url::form_urlencoded::parse(key.as_bytes())
            .next()
            .map(|(name, _)| name.into_owned())
            .unwrap_or_default();
        if OWN_PARAMS.contains(&name.as_str()) {
            let value = percent_decode_str(value).decode_utf8_lossy().into_owned();
            own.push((name, value));
        } else if driver_reads(kind, &name) {
            rest.push(pair);
        } else {
            return Err(format!(
                "unknown parameter {name:?} (this crate reads {}; sqlx reads {})",
                OWN_PARAMS.join(", "),
                match kind {
                    StoreKind::Postgres => format!("{}, options[NAME]", POSTGRES_PARAMS.join(", ")),
                    StoreKind::MySql => MYSQL_PARAMS.join(", "),
                    _ => SQLITE_PARAMS.join(", "),
                }
            ));
        }
    }
    let mut url = base.to_string();
    if !rest.is_empty() {
        url.push('?');
        url.push_str(&rest.join("&"));
    }
    if let Some(fragment) = fragment {
        url.push('#');
        url.push_str(fragment);
    }
    Ok((url, own))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_parameters_are_taken_out_of_the_driver_url() {
        let split = |kind, raw| split_params(kind, raw).unwrap();
        let (url, own) = split(
            StoreKind::MySql,
            "mysql://u:p@h/db?ssl-mode=REQUIRED&segments_table=leaf_alloc&segment_versions=false",
        );
        assert_eq!(url, "mysql://u:p@h/db?ssl-mode=REQUIRED");
        assert_eq!(
            own,
            [
                ("segments_table".to_string(), "leaf_alloc".to_string()),
                ("segment_versions".to_string(), "false".to_string()),
            ]
        );
        let (url, own) = split(StoreKind::Sqlite, "sqlite://ids.db?lease_table=my%5Fleases");
        assert_eq!(url, "sqlite://ids.db");
        assert_eq!(own, [("lease_table".to_string(), "my_leases".to_string())]);
        assert_eq!(
            split(StoreKind::Postgres, "postgres://h/db").0,
            "postgres://h/db"
        );
        let (url, own) = split(StoreKind::Postgres, "postgres://h/db?lease%5Ftable=t#f");
        assert_eq!(url, "postgres://h/db#f");
        assert_eq!(own, [("lease_table".to_string(), "t".to_string())]);
    }

    #[test]
    fn the_parameters_sqlx_reads_go_to_it() {
        for (kind, raw) in [
            (
                StoreKind::Postgres,
                "postgres://h/db?sslmode=verify-full&sslrootcert=/ca.pem&application_name=ids\
                 &options[synchronous_commit]=remote_apply&pass%77ord=pw&statement-cache-capacity=9",
            ),
            (
                StoreKind::MySql,
                "mysql://h/db?ssl-mode=VERIFY_CA&ssl-ca=/ca.pem&ssl-cert=/c.pem&ssl-key=/k.pem\
                 &charset=utf8mb4&time-zone=%2B00:00",
            ),
            (StoreKind::Sqlite, "sqlite://a.db?mode=rwc&cache=shared&immutable=0&vfs=unix"),
            (StoreKind::Sqlite, "sqlite://a%3Fb.db#x?mode=rwc"),
            (StoreKind::Postgres, "postgres://h/db#f?nonsense=1"),
        ] {
            assert_eq!(split_params(kind, raw), Ok((raw.to_string(), Vec::new())));
        }
    }

    #[test]
    fn a_parameter_sqlx_does_not_read_is_refused_by_name_only() {
        for (kind, raw, name) in [
            (
                StoreKind::Postgres,
                "postgres://ops@127.0.0.1:1/ids?sslpassword=keyPassphrase1",
                "sslpassword",
            ),
            (
                StoreKind::Postgres,
                "postgres://h/db?sslmode=require&options[x=keyPassphrase1",
                "options[x",
            ),
            // MySQL reads no password parameter: it would be dropped silently.
            (
                StoreKind::MySql,
                "mysql://h/db?password=keyPassphrase1",
                "password",
            ),
            (
                StoreKind::MySql,
                "mariadb://h/db?ssl-mode=REQUIRED&sslpassword=keyPassphrase1",
                "sslpassword",
            ),
            (
                StoreKind::Sqlite,
                "sqlite://a.db?mode=rwc&key=keyPassphrase1",
                "key",
            ),
            (
                StoreKind::Postgres,
                "postgres://h/db?lease_table=t&ssl%70assword=keyPassphrase1",
                "sslpassword",
            ),
        ] {
            let reason = split_params(kind, raw).expect_err(raw);
            assert!(reason.contains(&format!("{name:?}")), "{raw}: {reason}");
            assert!(!reason.contains("keyPassphrase1"), "{raw}: {reason}");
        }
    }
}
