//! The gRPC code checked in as `src/grpc/generated.rs` is what
//! `proto/workerid/v1/workerid.proto` generates: this test generates it again
//! with a protobuf compiler written in Rust (protox, no protoc) and fails on
//! any difference. After changing the .proto, write the new code with
//! `WORKERID_REGENERATE=1 cargo test -p workerid-server --test grpc_generated`.

use std::path::Path;

const HEADER: &str = "// Generated from proto/workerid/v1/workerid.proto by \
                      tests/grpc_generated.rs: do not edit.\n\n";

#[test]
fn the_checked_in_grpc_code_is_generated_from_the_proto() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let descriptors = protox::compile(["workerid/v1/workerid.proto"], [root.join("proto")])
        .expect("the .proto compiles");
    let out = tempfile::tempdir().unwrap();
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .emit_rerun_if_changed(false)
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("code generation");
    let generated = std::fs::read_to_string(out.path().join("workerid.v1.rs")).unwrap();
    let expected = format!("{HEADER}{generated}");
    let checked_in = root.join("src/grpc/generated.rs");
    if std::env::var_os("WORKERID_REGENERATE").is_some() {
        std::fs::write(&checked_in, &expected).unwrap();
        return;
    }
    let found = std::fs::read_to_string(&checked_in).unwrap_or_default();
    assert!(
        found == expected,
        "src/grpc/generated.rs is not what the .proto generates: run \
         WORKERID_REGENERATE=1 cargo test -p workerid-server --test grpc_generated"
    );
}
