//! Every Rust block of the README and of `docs/` compiled as a doctest of
//! the facade, so the documentation cannot drift from the code.

#[cfg(not(feature = "all"))]
compile_error!(
    "the documentation's doctests use every store: run them with `--features all` \
     (bash scripts/test.sh and cargo test --workspace turn it on)"
);

macro_rules! doctests {
    ($($name:ident => $path:literal),+ $(,)?) => {$(
        #[doc = include_str!($path)]
        pub struct $name;
    )+};
}

doctests! {
    Readme => "../README.md",
    Snowflake => "../docs/snowflake.md",
    Segments => "../docs/segments.md",
    ImplementingAStore => "../docs/implementing-a-store.md",
    Redis => "../docs/stores/redis.md",
    Etcd => "../docs/stores/etcd.md",
    Sql => "../docs/stores/sql.md",
    Memory => "../docs/stores/memory.md",
    Observability => "../docs/observability.md",
}
