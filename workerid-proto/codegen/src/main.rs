//! `cargo run -p workerid-proto-codegen`: writes `workerid-proto/src/generated.rs`
//! from the .proto, after a change to it.

fn main() {
    std::fs::write(
        workerid_proto_codegen::checked_in(),
        workerid_proto_codegen::generate(),
    )
    .expect("writing workerid-proto/src/generated.rs");
}
