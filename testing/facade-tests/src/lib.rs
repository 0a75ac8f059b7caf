//! The facade's tests live in `tests/`. This crate also compiles every Rust
//! block of the README and of `docs/` as a doctest, so the documentation
//! cannot drift from the code.

#[cfg(doctest)]
mod docs {
    macro_rules! doctests {
        ($($name:ident => $path:literal),+ $(,)?) => {$(
            #[doc = include_str!($path)]
            pub struct $name;
        )+};
    }
    doctests! {
        Readme => "../../../README.md",
        Snowflake => "../../../docs/snowflake.md",
        Segments => "../../../docs/segments.md",
        ImplementingAStore => "../../../docs/implementing-a-store.md",
        Redis => "../../../docs/stores/redis.md",
        Etcd => "../../../docs/stores/etcd.md",
        Sql => "../../../docs/stores/sql.md",
        Memory => "../../../docs/stores/memory.md",
    }
}
