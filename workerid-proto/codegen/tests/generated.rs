//! The gRPC code checked in as `workerid-proto/src/generated.rs` is what
//! `workerid-proto/proto/workerid/v1/workerid.proto` generates: this test
//! generates it again (protox, no protoc) and fails on any difference. After
//! changing the .proto: `cargo run -p workerid-proto-codegen`.

use workerid_proto_codegen as codegen;

#[test]
fn the_checked_in_grpc_code_is_generated_from_the_proto() {
    let found = std::fs::read_to_string(codegen::checked_in()).unwrap_or_default();
    assert!(
        found == codegen::generate(),
        "workerid-proto/src/generated.rs is not what the .proto generates: \
         run cargo run -p workerid-proto-codegen"
    );
}
