//! TLS to `https://` endpoints: the material given to the builder, and the
//! connection made when an endpoint's client is, so that a refused
//! certificate is an error that says so, at once.
//!
//! A channel connected lazily retries in the background: a handshake
//! that fails there only shows as requests that time out, with no word of
//! the certificate.

use std::error::Error as StdError;
use std::time::Duration;

use etcd_client::{Certificate, Identity, TlsOptions};
use tonic::transport::{Channel, Endpoint};

/// The CA, client identity and server name given to the builder (PEM).
#[derive(Clone, Default)]
pub(crate) struct TlsMaterial {
    pub ca: Option<Vec<u8>>,
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    pub domain: Option<String>,
}

/// Says which parts are set; a private key is never shown.
impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_certificate", &self.ca.is_some())
            .field("client_identity", &self.identity.is_some())
            .field("domain_name", &self.domain)
            .finish()
    }
}

impl TlsMaterial {
    /// etcd-client's options: the CA given, else the system's roots; the
    /// handshake bounded by `timeout`.
    pub(crate) fn options(&self, timeout: Duration) -> TlsOptions {
        let mut options = TlsOptions::new().timeout(timeout);
        options = match &self.ca {
            Some(ca) => options.ca_certificate(Certificate::from_pem(ca)),
            None => options.with_enabled_roots(),
        };
        if let Some((cert, key)) = &self.identity {
            options = options.identity(Identity::from_pem(cert, key));
        }
        if let Some(domain) = &self.domain {
            options = options.domain_name(domain.clone());
        }
        options
    }
}

/// Connects `endpoint` (of `url`, TLS configured) now, its TLS handshake
/// and HTTP/2 setup bounded by twice `timeout`; the channel connects again
/// by itself after its connection is lost.
///
/// # Errors
/// A refused handshake (certificate, protocol): `EndpointError`, which
/// the store does not retry; anything else (refused, timed out): an I/O
/// error, which it retries on the next endpoint.
pub(crate) async fn connect_now(
    endpoint: &Endpoint,
    connector: crate::connector::Connector,
    url: &str,
    timeout: Duration,
) -> Result<Channel, etcd_client::Error> {
    // The handshake has its own timeout; this one bounds the HTTP/2 setup too.
    let connecting = endpoint.connect_with_connector(connector);
    match tokio::time::timeout(timeout * 2, connecting).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(e)) => match tls_failure(&e) {
            Some(why) => Err(etcd_client::Error::EndpointError(format!(
                "TLS handshake with {url} failed: {why}"
            ))),
            None => Err(etcd_client::Error::IoError(std::io::Error::other(format!(
                "connect to {url}: {}",
                chain(&e)
            )))),
        },
        Err(_) => Err(etcd_client::Error::IoError(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("connect to {url}: no answer within {:?}", timeout * 2),
        ))),
    }
}

/// The rustls error in `error`'s chain, if the connection failed in the
/// TLS handshake. `io::Error::source` skips the error it wraps, hence the
/// look inside each I/O error.
fn tls_failure(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut level = Some(error);
    while let Some(e) = level {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        let wrapped = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if let Some(tls) = wrapped {
            return Some(tls.to_string());
        }
        level = e.source();
    }
    None
}

/// `error` and its sources, one message after the other.
fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut level = error.source();
    while let Some(e) = level {
        text.push_str(": ");
        text.push_str(&e.to_string());
        level = e.source();
    }
    text
}
