//! What the worker tests share.

#[allow(dead_code)] // each binary uses part of it
pub mod flaky;
