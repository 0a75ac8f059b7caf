//! The TLS files a Redis or etcd URL names.

use crate::store_url::StoreUrl;
use crate::OpenError;

/// The TLS files a URL names: `cacert`, `cert` and `key`, read.
// Without TLS compiled in, `read` refuses every URL that names the files.
#[cfg_attr(not(feature = "tls-rustls"), allow(dead_code))]
pub(crate) struct TlsFiles {
    pub ca: Option<Vec<u8>>,
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsFiles {
    /// Reads the files; refuses them on a plain URL, or without TLS compiled in.
    pub fn read(url: &StoreUrl) -> Result<TlsFiles, OpenError> {
        let (ca, cert, key) = (url.param("cacert"), url.param("cert"), url.param("key"));
        let named = ca.is_some() || cert.is_some() || key.is_some();
        if named && !url.tls {
            let tls_scheme = url.kind.schemes()[1];
            return Err(url.bad(format!(
                "cacert, cert and key are TLS settings: use {tls_scheme}://"
            )));
        }
        if url.tls && !cfg!(feature = "tls-rustls") {
            return Err(url.bad(
                "TLS is not compiled in (enable the feature \"tls-rustls\" of the workerid crate)",
            ));
        }
        let identity = match (cert, key) {
            (Some(cert), Some(key)) => Some((
                read_file(url, "client certificate", cert)?,
                read_file(url, "client key", key)?,
            )),
            (None, None) => None,
            _ => return Err(url.bad("cert and key go together")),
        };
        Ok(TlsFiles {
            ca: ca
                .map(|path| read_file(url, "CA certificate", path))
                .transpose()?,
            identity,
        })
    }
}

fn read_file(url: &StoreUrl, what: &'static str, path: &str) -> Result<Vec<u8>, OpenError> {
    std::fs::read(path).map_err(|e| OpenError::File {
        url: url.redacted.clone(),
        what,
        path: path.to_string(),
        reason: e.to_string(),
    })
}
