//! Generates `workerid-proto/src/generated.rs` from
//! `workerid-proto/proto/workerid/v1/workerid.proto` with a protobuf
//! compiler written in Rust (protox): `cargo run -p workerid-proto-codegen`
//! after changing the .proto. Building workerid-proto needs neither this nor
//! protoc; this crate's test `generated` checks the checked-in file is what
//! the .proto generates.

use std::path::{Path, PathBuf};

const HEADER: &str = "// Generated from proto/workerid/v1/workerid.proto by \
                      workerid-proto-codegen: do not edit.\n\n";

/// The messages that carry a secret: a lease's token, or a range's receipt.
const SECRET_HOLDERS: [&str; 4] = [
    ".workerid.v1.AcquireRequest",
    ".workerid.v1.RenewRequest",
    ".workerid.v1.ReleaseRequest",
    ".workerid.v1.SegmentRange",
];

/// The workerid-proto crate.
fn proto_crate() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where the generated code is checked in.
pub fn checked_in() -> PathBuf {
    proto_crate().join("src/generated.rs")
}

/// The code the .proto generates, as checked in.
///
/// # Panics
/// When the .proto does not compile or the code cannot be generated.
pub fn generate() -> String {
    let root = proto_crate();
    let descriptors = protox::compile(["workerid/v1/workerid.proto"], [root.join("proto")])
        .expect("the .proto compiles");
    let out = tempfile::tempdir().expect("a temporary directory");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .emit_rerun_if_changed(false)
        // Their Debug is written by hand, hiding the token and the receipt.
        .skip_debug(SECRET_HOLDERS)
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("code generation");
    let generated =
        std::fs::read_to_string(out.path().join("workerid.v1.rs")).expect("the generated file");
    format!("{HEADER}{generated}")
}
