//! Throwaway certificates for TLS tests, made at test time with `rcgen`:
//! a CA, a server certificate for `127.0.0.1` and `localhost` signed by it, a
//! client certificate signed by it, and a second, unrelated CA (the "wrong
//! CA") for tests that must see a certificate refused.
//!
//! The files are PEM, in a temporary directory that lives as long as the test
//! binary ([`files`]), or as long as a [`TlsFiles`] of one's own.
//!
//! ```no_run
//! let tls = workerid_testkit::tls::files();
//! let ca: Vec<u8> = tls.ca_pem();
//! let (cert, key) = tls.client_identity_pem();
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The names the server certificate is valid for (subject alternative names).
pub const SERVER_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// A CA, a server and a client certificate signed by it, and a wrong CA, as
/// PEM files in a temporary directory (removed when this is dropped).
#[derive(Debug)]
pub struct TlsFiles {
    dir: tempfile::TempDir,
}

impl TlsFiles {
    /// Makes fresh keys and certificates and writes them as PEM files.
    ///
    /// Panics if a certificate cannot be made or written (a test failure).
    pub fn generate() -> TlsFiles {
        let dir = tempfile::Builder::new()
            .prefix("workerid-tls-")
            .tempdir()
            .expect("create a temporary directory for certificates");
        // Servers that run as another user (PostgreSQL) read their copies
        // elsewhere; this directory only needs to be readable by the tests
        // and by servers that run as root.
        let (ca_params, ca_key) = authority("workerid test CA");
        let ca = ca_params.self_signed(&ca_key).expect("self-sign the CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let server = leaf(
            "workerid test server",
            &SERVER_NAMES,
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let server_cert = server
            .0
            .signed_by(&server.1, &issuer)
            .expect("sign the server certificate");
        let client = leaf(
            "workerid test client",
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let client_cert = client
            .0
            .signed_by(&client.1, &issuer)
            .expect("sign the client certificate");
        let (wrong_params, wrong_key) = authority("workerid wrong CA");
        let wrong = wrong_params
            .self_signed(&wrong_key)
            .expect("self-sign the wrong CA");
        let files = TlsFiles { dir };
        for (name, pem) in [
            (CA, ca.pem()),
            (SERVER_CERT, server_cert.pem()),
            (SERVER_KEY, server.1.serialize_pem()),
            (CLIENT_CERT, client_cert.pem()),
            (CLIENT_KEY, client.1.serialize_pem()),
            (WRONG_CA, wrong.pem()),
        ] {
            std::fs::write(files.dir.path().join(name), pem)
                .unwrap_or_else(|e| panic!("write {name}: {e}"));
        }
        files
    }

    /// The directory that holds the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA's certificate (PEM file).
    pub fn ca_cert(&self) -> PathBuf {
        self.dir().join(CA)
    }

    /// The server's certificate, for `127.0.0.1` and `localhost`, signed by the CA.
    pub fn server_cert(&self) -> PathBuf {
        self.dir().join(SERVER_CERT)
    }

    /// The server's private key (PKCS#8 PEM).
    pub fn server_key(&self) -> PathBuf {
        self.dir().join(SERVER_KEY)
    }

    /// The client's certificate, signed by the CA.
    pub fn client_cert(&self) -> PathBuf {
        self.dir().join(CLIENT_CERT)
    }

    /// The client's private key (PKCS#8 PEM).
    pub fn client_key(&self) -> PathBuf {
        self.dir().join(CLIENT_KEY)
    }

    /// A CA that signed nothing the servers use.
    pub fn wrong_ca_cert(&self) -> PathBuf {
        self.dir().join(WRONG_CA)
    }

    /// The CA's certificate, as PEM bytes.
    pub fn ca_pem(&self) -> Vec<u8> {
        read(&self.ca_cert())
    }

    /// The wrong CA's certificate, as PEM bytes.
    pub fn wrong_ca_pem(&self) -> Vec<u8> {
        read(&self.wrong_ca_cert())
    }

    /// The client's certificate and key, as PEM bytes.
    pub fn client_identity_pem(&self) -> (Vec<u8>, Vec<u8>) {
        (read(&self.client_cert()), read(&self.client_key()))
    }
}

const CA: &str = "ca.pem";
const SERVER_CERT: &str = "server.pem";
const SERVER_KEY: &str = "server.key";
const CLIENT_CERT: &str = "client.pem";
const CLIENT_KEY: &str = "client.key";
const WRONG_CA: &str = "wrong-ca.pem";

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn authority(name: &str) -> (CertificateParams, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (params, KeyPair::generate().expect("a CA key"))
}

fn leaf(name: &str, sans: &[&str], usage: ExtendedKeyUsagePurpose) -> (CertificateParams, KeyPair) {
    let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(sans).expect("certificate parameters");
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    (params, KeyPair::generate().expect("a key"))
}

/// The certificates every test of this binary shares, made once; their
/// directory is removed when the binary exits.
pub fn files() -> &'static TlsFiles {
    static SHARED: OnceLock<&'static TlsFiles> = OnceLock::new();
    SHARED.get_or_init(|| {
        let files: &'static TlsFiles = Box::leak(Box::new(TlsFiles::generate()));
        crate::cleanup::register_dir(files.dir().to_path_buf());
        files
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_pem_and_the_password_encodes_as_declared() {
        let files = TlsFiles::generate();
        for path in [
            files.ca_cert(),
            files.server_cert(),
            files.client_cert(),
            files.wrong_ca_cert(),
        ] {
            let text = std::fs::read_to_string(&path).expect("a certificate");
            assert!(text.starts_with("-----BEGIN CERTIFICATE-----"), "{path:?}");
        }
        for path in [files.server_key(), files.client_key()] {
            let text = std::fs::read_to_string(&path).expect("a key");
            assert!(text.starts_with("-----BEGIN PRIVATE KEY-----"), "{path:?}");
        }
        assert_ne!(files.ca_pem(), files.wrong_ca_pem());
        assert_eq!(crate::url_encode(crate::PASSWORD), crate::PASSWORD_IN_URL);
        assert_eq!(
            crate::url_encode(crate::WRONG_PASSWORD),
            crate::WRONG_PASSWORD_IN_URL
        );
    }
}
