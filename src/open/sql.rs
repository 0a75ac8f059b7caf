//! Opening PostgreSQL, MySQL, MariaDB and SQLite.

use std::sync::Arc;

use super::{connect_error, Opened};
use crate::store_url::StoreUrl;
use crate::{OpenError, OpenOptions};

pub(crate) async fn open(options: &OpenOptions, url: &StoreUrl) -> Result<Opened, OpenError> {
    let mut builder = workerid_sql::SqlStore::builder().create_tables(!options.read_only);
    if let Some(max) = options.max_connections {
        builder = builder.max_connections(max);
    }
    if let Some(timeout) = options.connect_timeout {
        builder = builder.acquire_timeout(timeout);
    }
    let store = builder
        .connect(&url.raw)
        .await
        .map_err(|e| connect_error(url, e))?;
    Ok(Arc::new(store))
}
