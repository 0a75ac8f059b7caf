//! TLS material for `rediss://` URLs, and the rustls crypto provider.

use redis::{ClientTlsConfig, TlsCertificates};

/// The CA and client identity given to the builder (PEM).
#[derive(Clone, Default)]
pub(crate) struct TlsMaterial {
    pub ca: Option<Vec<u8>>,
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// Says which parts are set; a private key is never shown.
impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_certificate", &self.ca.is_some())
            .field("client_identity", &self.identity.is_some())
            .finish()
    }
}

impl TlsMaterial {
    /// What `redis` takes: the CA (none: the system's roots) and the
    /// client's certificate and key.
    pub(crate) fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: self.identity.as_ref().map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            root_cert: self.ca.clone(),
        }
    }
}

/// Installs rustls's ring provider as the process default unless one is
/// installed already: `redis` builds its TLS configuration with the process
/// default, which rustls cannot pick by itself when another crate of the
/// binary compiles in a second provider.
pub(crate) fn install_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: a default exists.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
