pub use workerid_core::*;
