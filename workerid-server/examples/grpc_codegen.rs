//! Writes `src/grpc/generated.rs` from `proto/workerid/v1/workerid.proto`
//! with a protobuf compiler written in Rust (protox): run it after changing
//! the .proto, `cargo run -p workerid-server --example grpc_codegen`.
//! Building the server needs neither this nor protoc; the test
//! `grpc_generated` checks the file is what the .proto generates.

use std::path::{Path, PathBuf};

const HEADER: &str = "// Generated from proto/workerid/v1/workerid.proto by \
                      examples/grpc_codegen.rs: do not edit.\n\n";

/// Where the generated code is checked in.
pub fn checked_in() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/grpc/generated.rs")
}

/// The code the .proto generates, as checked in.
///
/// # Panics
/// When the .proto does not compile or the code cannot be generated.
pub fn generate() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let descriptors = protox::compile(["workerid/v1/workerid.proto"], [root.join("proto")])
        .expect("the .proto compiles");
    let out = tempfile::tempdir().expect("a temporary directory");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .emit_rerun_if_changed(false)
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("code generation");
    let generated =
        std::fs::read_to_string(out.path().join("workerid.v1.rs")).expect("the generated file");
    format!("{HEADER}{generated}")
}

#[allow(dead_code)]
fn main() {
    std::fs::write(checked_in(), generate()).expect("writing src/grpc/generated.rs");
}
