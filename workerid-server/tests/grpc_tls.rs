//! TLS on the gRPC port (`grpc_tls_cert`, `grpc_tls_key`, and
//! `grpc_tls_client_ca` for client certificates), through workerid-client:
//! a client that trusts the server's CA is served; one that trusts another
//! CA, or speaks plain HTTP/2, or lacks the client certificate the server
//! asks for, is not.

mod client;

use std::time::Duration;

use workerid::segment::SegmentStore;
use workerid_client::{ConnectError, ServerStore};
use workerid_testkit::ServerProcess;

/// A server on a SQLite file with TLS on its gRPC port (and client
/// certificates signed by the test CA if `client_ca`); its gRPC port.
fn launch(client_ca: bool) -> (ServerProcess, u16) {
    let tls = workerid_testkit::tls::files();
    let mut settings = format!(
        "grpc_tls_cert = \"{}\"\ngrpc_tls_key = \"{}\"\n",
        tls.server_cert().display(),
        tls.server_key().display()
    );
    if client_ca {
        settings.push_str(&format!(
            "grpc_tls_client_ca = \"{}\"\n",
            tls.ca_cert().display()
        ));
    }
    client::launch_with(&client::sqlite_file(), &settings)
}

fn builder(url: String) -> workerid_client::ServerStoreBuilder {
    ServerStore::builder(url).connect_timeout(Duration::from_secs(2))
}

#[tokio::test(flavor = "multi_thread")]
async fn only_clients_that_trust_the_servers_ca_are_served() {
    let tls = workerid_testkit::tls::files();
    let (_server, port) = launch(false);
    let https = format!("https://127.0.0.1:{port}");
    let store = builder(https.clone())
        .ca_certificate_pem(tls.ca_pem())
        .connect()
        .await
        .expect("a client that trusts the CA connects");
    assert!(store.list_tags().await.is_ok());

    let wrong = builder(https.clone())
        .ca_certificate_pem(tls.wrong_ca_pem())
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(wrong, ConnectError::Unavailable { .. }), "{wrong}");
    let public_roots = builder(https).connect().await.unwrap_err();
    assert!(
        matches!(public_roots, ConnectError::Unavailable { .. }),
        "{public_roots}"
    );
    let plain = builder(format!("http://127.0.0.1:{port}"))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(plain, ConnectError::Unavailable { .. }), "{plain}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_asks_for_client_certificates_gets_them() {
    let tls = workerid_testkit::tls::files();
    let (_server, port) = launch(true);
    let https = format!("https://127.0.0.1:{port}");
    let anonymous = builder(https.clone())
        .ca_certificate_pem(tls.ca_pem())
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(anonymous, ConnectError::Unavailable { .. }),
        "{anonymous}"
    );
    let (cert, key) = tls.client_identity_pem();
    let store = builder(https)
        .ca_certificate_pem(tls.ca_pem())
        .client_identity_pem(cert, key)
        .connect()
        .await
        .expect("a client with a certificate the CA signed connects");
    assert!(store.list_tags().await.is_ok());
}

#[test]
fn a_certificate_that_cannot_be_used_stops_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(
        &config,
        format!(
            "store = \"{}\"\nlisten = \"127.0.0.1:{}\"\ngrpc_listen = \"127.0.0.1:{}\"\n\
             grpc_tls_cert = \"{}\"\ngrpc_tls_key = \"{}\"\n",
            client::sqlite_file(),
            workerid_testkit::free_port(),
            workerid_testkit::free_port(),
            garbage.display(),
            garbage.display()
        ),
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workerid-server"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("grpc_tls_cert"), "{stderr}");
}
