//! Traces over OTLP: a real server with `--otlp-endpoint` sends its spans
//! to a collector (here OpenTelemetry's own gRPC trace service, served by
//! the test), with the store's fields and no secret in any attribute; a
//! span per request when the filter asks for them, parent of the store
//! spans the request caused; a bad endpoint is a configuration error.

mod common;

use std::sync::{Arc, Mutex};

use common::{sqlite, Launch, Server};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use workerid_proto::v1::leases_client::LeasesClient;
use workerid_proto::v1::AcquireRequest;

/// Every export request the collector received.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A span as the collector got it: its name, attributes as text, and
/// place in its trace.
#[derive(Debug)]
struct Got {
    name: String,
    attributes: Vec<(String, String)>,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
}

impl Got {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A collector served on a free port, and its endpoint.
async fn collector() -> (Collector, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let collector = Collector::default();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (collector, endpoint)
}

fn spans(requests: &[ExportTraceServiceRequest]) -> (Vec<Got>, Vec<(String, String)>) {
    let text = |kv: &opentelemetry_proto::tonic::common::v1::KeyValue| {
        let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
        (kv.key.clone(), format!("{value:?}"))
    };
    let mut got = Vec::new();
    let mut resource = Vec::new();
    for request in requests {
        for rs in &request.resource_spans {
            if let Some(r) = &rs.resource {
                resource.extend(r.attributes.iter().map(text));
            }
            for ss in &rs.scope_spans {
                for span in &ss.spans {
                    got.push(Got {
                        name: span.name.clone(),
                        attributes: span.attributes.iter().map(text).collect(),
                        trace_id: span.trace_id.clone(),
                        span_id: span.span_id.clone(),
                        parent_span_id: span.parent_span_id.clone(),
                    });
                }
            }
        }
    }
    (got, resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_collector_without_secrets() {
    let (collector, endpoint) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let token = "tr4ces-must-not-show-this";
    let server = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        let endpoint = endpoint.clone();
        move || {
            let server = Server::launch(
                &dir,
                &sqlite(&dir),
                &Launch {
                    args: &["--otlp-endpoint", &endpoint, "--auth-token", token],
                    env: &[("RUST_LOG", "info")],
                    ..Launch::default()
                },
            );
            let auth = format!("Authorization: Bearer {token}");
            for path in ["/alloc?biz_tag=test", "/api/snowflake/get/any"] {
                assert_eq!(server.try_get(path, &[&auth]).unwrap().0, 200, "{path}");
            }
            // SIGTERM: the exporter sends what it batched before the exit.
            assert!(server.terminate().success());
        }
    });
    server.await.unwrap();
    let requests = collector.0.lock().unwrap().clone();
    let (got, resource) = spans(&requests);
    let named = |name: &'static str| got.iter().filter(move |s| s.name == name);
    let store_spans: Vec<&Got> = named("workerid.store").collect();
    assert!(!store_spans.is_empty(), "no store span in {got:#?}");
    assert!(store_spans.iter().any(|s| s
        .attribute("db.system.name")
        .is_some_and(|v| v.contains("sqlite"))
        && s.attribute("db.operation.name")
            .is_some_and(|v| v.contains("reserve"))));
    assert!(
        got.iter()
            .all(|s| s.attribute("workerid.endpoint").is_none()),
        "no request span unless the filter asks for them: {got:#?}"
    );
    assert!(
        named("workerid.segment.refill").next().is_some(),
        "{got:#?}"
    );
    assert!(resource
        .iter()
        .any(|(k, v)| k == "service.name" && v.contains("workerid-server")));
    for span in &got {
        for (key, value) in &span.attributes {
            assert!(
                !value.contains(token),
                "{} {key} shows the token",
                span.name
            );
        }
    }
}

/// With `workerid::request=debug` each request has a span named after its
/// endpoint, with its status, and the store spans it caused are its
/// children: over HTTP through the router and the `/alloc` fast path, and
/// over gRPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_has_a_span_when_the_filter_asks() {
    let (collector, endpoint) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let grpc = workerid_testkit::free_port();
    let server = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        move || {
            let top = format!("grpc_listen = \"127.0.0.1:{grpc}\"\n");
            let server = Server::launch(
                &dir,
                &sqlite(&dir),
                &Launch {
                    top: &top,
                    args: &["--otlp-endpoint", &endpoint],
                    env: &[("RUST_LOG", "info,workerid::request=debug")],
                    ..Launch::default()
                },
            );
            for path in ["/alloc?biz_tag=test", "/api/segment/get/test"] {
                assert_eq!(server.get(path).0, 200, "{path}");
            }
            assert_eq!(server.get("/api/segment/get/absent").0, 500);
            server
        }
    })
    .await
    .unwrap();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{grpc}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut leases = LeasesClient::new(channel);
    leases
        .acquire(AcquireRequest {
            namespace: "traced".into(),
            max_worker_id: 3,
            token: workerid::Token::generate().to_string(),
            ttl_ms: 10_000,
            holder: "traces-test".into(),
        })
        .await
        .unwrap();
    let exit = tokio::task::spawn_blocking(move || server.terminate());
    assert!(exit.await.unwrap().success());

    let requests = collector.0.lock().unwrap().clone();
    let (got, _) = spans(&requests);
    let request = |endpoint: &str, status: &str| {
        got.iter()
            .find(|s| {
                s.attribute("workerid.endpoint")
                    .is_some_and(|v| v.contains(endpoint))
                    && s.attribute("http.response.status_code")
                        .is_some_and(|v| v.contains(status))
            })
            .unwrap_or_else(|| panic!("no span of {endpoint} answered {status}: {got:#?}"))
    };
    request("/alloc", "200");
    let leaf = request("/api/segment/get/{key}", "200");
    assert_eq!(leaf.name, "/api/segment/get/{key}", "named after its route");
    request("/api/segment/get/{key}", "500");
    let acquire = request("/workerid.v1.Leases/Acquire", "200");
    let child = got
        .iter()
        .find(|s| {
            s.attribute("db.operation.name")
                .is_some_and(|v| v.contains("acquire"))
                && s.attribute("workerid.target")
                    .is_some_and(|v| v.contains("traced"))
        })
        .unwrap_or_else(|| panic!("no store span of the acquire: {got:#?}"));
    assert_eq!(
        (&child.trace_id, &child.parent_span_id),
        (&acquire.trace_id, &acquire.span_id),
        "the store span is the request span's child"
    );
}

#[test]
fn a_bad_otlp_endpoint_is_a_configuration_error() {
    for bad in ["collector:4317", "https://collector:4317", "http://"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_workerid-server"))
            .args(["--otlp-endpoint", bad, "--listen", "127.0.0.1:1"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("otlp_endpoint"));
    }
}

/// A collector that does not answer is said in the log once, with its
/// address and no password, rather than dropping spans unseen.
#[test]
fn a_collector_that_does_not_take_spans_is_logged_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://u:hunter22@{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path(),
        &sqlite(dir.path()),
        &Launch {
            args: &["--otlp-endpoint", &endpoint],
            // The spans are info; the filter picks what is exported too.
            env: &[("RUST_LOG", "info")],
            ..Launch::default()
        },
    );
    for _ in 0..3 {
        assert_eq!(server.get("/alloc?biz_tag=test").0, 200);
    }
    // The batch goes out within the exporter's 5 s; then more requests,
    // and the shutdown's flush, fail too, unsaid.
    let said = std::time::Instant::now();
    while !server.log_text().contains("traces: the collector at") {
        assert!(
            said.elapsed() < std::time::Duration::from_secs(20),
            "{}",
            server.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for _ in 0..3 {
        assert_eq!(server.get("/alloc?biz_tag=test").0, 200);
    }
    let log = server.log.clone();
    assert!(server.terminate().success());
    let log = std::fs::read_to_string(log).unwrap();
    let said = log.matches("traces: the collector at").count();
    assert_eq!(said, 1, "{log}");
    assert!(log.contains("u:***@127.0.0.1"), "{log}");
    assert!(!log.contains("hunter22"), "{log}");
}
