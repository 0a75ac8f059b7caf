//! Opening PostgreSQL, MySQL, MariaDB and SQLite.

use std::sync::Arc;

use percent_encoding::percent_decode_str;

use super::{connect_error, Opened};
use crate::store_url::StoreUrl;
use crate::{OpenError, OpenOptions};

/// The URL parameters this crate reads itself; every other one goes to
/// sqlx (`sslmode`, `ssl-mode`, `mode`, ...).
const OWN_PARAMS: [&str; 3] = ["lease_table", "segments_table", "segment_versions"];

pub(crate) async fn open(options: &OpenOptions, url: &StoreUrl) -> Result<Opened, OpenError> {
    let (driver_url, own) = split_own_params(&url.raw);
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

/// `raw` without the parameters of [`OWN_PARAMS`], and those, decoded.
fn split_own_params(raw: &str) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = raw.split_once('?') else {
        return (raw.to_string(), Vec::new());
    };
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query, None),
    };
    let mut own = Vec::new();
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if OWN_PARAMS.contains(&key) {
            let value = percent_decode_str(value).decode_utf8_lossy().into_owned();
            own.push((key.to_string(), value));
        } else {
            rest.push(pair);
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
    (url, own)
}

#[cfg(test)]
mod tests {
    use super::split_own_params;

    #[test]
    fn own_parameters_are_taken_out_of_the_driver_url() {
        let (url, own) = split_own_params(
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
        let (url, own) = split_own_params("sqlite://ids.db?lease_table=my%5Fleases");
        assert_eq!(url, "sqlite://ids.db");
        assert_eq!(own, [("lease_table".to_string(), "my_leases".to_string())]);
        assert_eq!(split_own_params("postgres://h/db").0, "postgres://h/db");
    }
}
