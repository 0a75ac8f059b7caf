//! The gRPC API from another language: Python stubs generated from the
//! repository's .proto by grpc_tools (Debian's `python3-grpc-tools`, which
//! carries its own compiler; `scripts/setup.sh` installs it) take IDs, a
//! batch, a stream and a lease from a real server, give a segment tail back
//! with its receipt (a forged one is refused), and list tags a page at a
//! time (`tests/python/grpc_client.py`).

mod common;

use std::path::Path;
use std::process::Command;

use common::{launch_with_grpc, Launch};

/// Debian's Python, whose packages have grpcio and grpc_tools (another
/// `python3` first on the PATH may not).
const PYTHON: &str = "/usr/bin/python3";

fn run(command: &mut Command, what: &str) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {PYTHON} ({e}): run scripts/setup.sh"));
    assert!(
        output.status.success(),
        "{what} failed (python3-grpcio and python3-grpc-tools come with scripts/setup.sh):\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_python_client_takes_ids_a_stream_and_a_lease() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, grpc) = launch_with_grpc(dir.path(), &Launch::default());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let proto = root.join("../workerid-proto/proto");
    let stubs = dir.path().join("stubs");
    std::fs::create_dir(&stubs).unwrap();
    run(
        Command::new(PYTHON)
            .args(["-m", "grpc_tools.protoc", "-I"])
            .arg(&proto)
            .arg(format!("--python_out={}", stubs.display()))
            .arg(format!("--grpc_python_out={}", stubs.display()))
            .arg("workerid/v1/workerid.proto"),
        "generating the Python stubs",
    );
    let printed = run(
        Command::new(PYTHON)
            .arg(root.join("tests/python/grpc_client.py"))
            .arg(&stubs)
            .arg(format!("127.0.0.1:{grpc}")),
        "the Python client",
    );
    let got: serde_json::Value = serde_json::from_str(printed.trim()).unwrap();
    assert_eq!(got["one"], serde_json::json!([1]));
    let batch: Vec<u64> = serde_json::from_value(got["batch"].clone()).unwrap();
    assert_eq!(batch, (2..=101).collect::<Vec<_>>());
    let snowflakes: Vec<u64> = serde_json::from_value(got["snowflakes"].clone()).unwrap();
    assert_eq!(snowflakes.len(), 5);
    assert!(snowflakes.windows(2).all(|w| w[0] < w[1]), "{snowflakes:?}");
    let stream: Vec<Vec<u64>> = serde_json::from_value(got["stream"].clone()).unwrap();
    assert_eq!(
        stream,
        (0..3)
            .map(|b| (5000 + 10 * b..5010 + 10 * b).collect())
            .collect::<Vec<Vec<u64>>>()
    );
    assert!(got["decoded_unix_ms"].as_u64().unwrap() > 1_700_000_000_000);
    assert_eq!(got["layout_unix_ms"], got["decoded_unix_ms"]);
    assert_eq!(
        got["bad_count"],
        serde_json::json!({"status": "INVALID_ARGUMENT", "code": "invalid_count"})
    );
    assert_eq!(
        got["stolen_renew"],
        serde_json::json!({"status": "FAILED_PRECONDITION", "code": "token_mismatch"})
    );
    let id = got["lease"]["worker_id"].clone();
    assert_eq!(
        got["listed"],
        serde_json::json!([[id, "live", "python-client"]])
    );
    assert_eq!(got["after_release"], serde_json::json!([[id, "free", 9]]));
    assert_eq!(
        got["forged_give_back"],
        serde_json::json!({"status": "PERMISSION_DENIED", "code": "unknown_range"})
    );
    assert_eq!(
        got["given_back"], true,
        "the two ranges' tails, with the receipt"
    );
    assert_eq!(got["after_give_back"], 4);
    let pages: Vec<Vec<String>> = serde_json::from_value(got["tag_pages"].clone()).unwrap();
    let tags: Vec<String> = serde_json::from_value(got["tags"].clone()).unwrap();
    assert!(pages.iter().all(|page| page.len() == 1), "{pages:?}");
    assert_eq!(pages.concat(), tags);
    assert!(tags.contains(&"py".to_owned()) && tags.windows(2).all(|w| w[0] < w[1]));
}
