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

/// A store builder that takes a CA and a client identity, as PEM.
#[cfg(feature = "tls-rustls")]
pub(crate) trait TlsBuilder: Sized {
    fn ca_pem(self, pem: Vec<u8>) -> Self;
    fn identity_pem(self, cert: Vec<u8>, key: Vec<u8>) -> Self;
}

#[cfg(all(feature = "tls-rustls", feature = "redis"))]
impl TlsBuilder for workerid_redis::RedisStoreBuilder {
    fn ca_pem(self, pem: Vec<u8>) -> Self {
        self.ca_certificate_pem(pem)
    }
    fn identity_pem(self, cert: Vec<u8>, key: Vec<u8>) -> Self {
        self.client_identity_pem(cert, key)
    }
}

#[cfg(all(feature = "tls-rustls", feature = "etcd"))]
impl TlsBuilder for workerid_etcd::EtcdStoreBuilder {
    fn ca_pem(self, pem: Vec<u8>) -> Self {
        self.ca_certificate_pem(pem)
    }
    fn identity_pem(self, cert: Vec<u8>, key: Vec<u8>) -> Self {
        self.client_identity_pem(cert, key)
    }
}

impl TlsFiles {
    /// Hands the files to `builder` (with TLS compiled in; without it,
    /// [`TlsFiles::read`] refused the URL already).
    #[cfg(feature = "tls-rustls")]
    pub(crate) fn apply<B: TlsBuilder>(self, mut builder: B) -> B {
        if let Some(ca) = self.ca {
            builder = builder.ca_pem(ca);
        }
        if let Some((cert, key)) = self.identity {
            builder = builder.identity_pem(cert, key);
        }
        builder
    }

    /// Without TLS compiled in there is nothing to hand over.
    #[cfg(not(feature = "tls-rustls"))]
    pub(crate) fn apply<B>(self, builder: B) -> B {
        builder
    }

    /// Reads the files; refuses them on a plain URL, or without TLS compiled in.
    pub(crate) fn read(url: &StoreUrl) -> Result<TlsFiles, OpenError> {
        let (ca, cert, key) = (url.param("cacert"), url.param("cert"), url.param("key"));
        let named = ca.is_some() || cert.is_some() || key.is_some();
        if named && !url.tls {
            return Err(url.bad(match url.kind.schemes().get(1) {
                Some(tls_scheme) => {
                    format!("cacert, cert and key are TLS settings: use {tls_scheme}://")
                }
                None => format!(
                    "cacert, cert and key are TLS settings, and a {} URL has no TLS",
                    url.kind
                ),
            }));
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
