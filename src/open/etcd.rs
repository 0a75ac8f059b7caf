//! Opening etcd.

use std::sync::Arc;
use std::time::Duration;

use super::tls_files::TlsFiles;
use super::{connect_error, Opened};
use crate::store_url::StoreUrl;
use crate::{OpenError, OpenOptions};

pub(crate) async fn open(options: &OpenOptions, url: &StoreUrl) -> Result<Opened, OpenError> {
    url.check_params(&["cacert", "cert", "key"])?;
    let tls = TlsFiles::read(url)?;
    let scheme = if url.tls { "https" } else { "http" };
    let endpoints: Vec<String> = url
        .hosts
        .iter()
        .map(|host| {
            let has_port = host.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
            if has_port {
                format!("{scheme}://{host}")
            } else {
                format!("{scheme}://{host}:2379")
            }
        })
        .collect();
    let mut builder = workerid_etcd::EtcdStore::builder();
    match (&url.user, &url.password) {
        (Some(user), Some(password)) => builder = builder.credentials(user, password),
        (None, None) => {}
        _ => return Err(url.bad("etcd credentials are USER:PASSWORD@")),
    }
    let prefix = url.path.trim_end_matches('/');
    if !prefix.is_empty() {
        builder = builder.key_prefix(prefix);
    }
    if let Some(timeout) = options.connect_timeout {
        builder = builder.connect_timeout(timeout);
    }
    if let Some(timeout) = options.request_timeout {
        // The whole operation gets the timeout; one member gets at most 1 s
        // of it before the next is tried.
        builder = builder
            .operation_timeout(timeout)
            .request_timeout(timeout.min(Duration::from_secs(1)));
    }
    builder = tls.apply(builder);
    let store = builder
        .connect(&endpoints)
        .await
        .map_err(|e| connect_error(url, e))?;
    Ok(Arc::new(store))
}
