//! The gRPC code checked in as `src/grpc/generated.rs` is what
//! `proto/workerid/v1/workerid.proto` generates: this test generates it
//! again (protox, no protoc) and fails on any difference. After changing the
//! .proto: `cargo run -p workerid-server --example grpc_codegen`.

#[path = "../examples/grpc_codegen.rs"]
mod codegen;

#[test]
fn the_checked_in_grpc_code_is_generated_from_the_proto() {
    let found = std::fs::read_to_string(codegen::checked_in()).unwrap_or_default();
    assert!(
        found == codegen::generate(),
        "src/grpc/generated.rs is not what the .proto generates: run \
         cargo run -p workerid-server --example grpc_codegen"
    );
}
