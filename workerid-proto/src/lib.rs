//! The gRPC API of `workerid-server`, as
//! [`proto/workerid/v1/workerid.proto`](https://docs.rs/crate/workerid-proto/latest/source/proto/workerid/v1/workerid.proto)
//! defines it, with the Rust code generated from it: messages, a client and
//! a server trait per service (`Ids`, `Leases`, `Segments`).
//!
//! The code is generated ahead of time and checked in, so building needs no
//! `protoc`: after changing the .proto, `cargo run -p
//! workerid-proto-codegen` writes it again with protox (a protobuf compiler
//! in Rust), and that crate's test `generated` fails while the two differ.
//!
//! ```
//! use workerid_proto::v1::NextIdsRequest;
//! let request = NextIdsRequest { tag: "orders".into(), count: 100 };
//! assert_eq!(request.count, 100);
//! ```
#![deny(missing_docs)]

/// Version 1 of the API (`package workerid.v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    include!("generated.rs");
}

mod redacted;

/// The metadata key of a refusal's stable error code (`invalid_count`,
/// `token_mismatch`, ...; the list is in the .proto).
pub const CODE_KEY: &str = "workerid-code";

/// The metadata key of a `config_mismatch` refusal's stored pool size.
pub const STORED_KEY: &str = "workerid-stored";

/// The metadata key of a `namespace_in_use` refusal's live lease count.
pub const LIVE_KEY: &str = "workerid-live";
