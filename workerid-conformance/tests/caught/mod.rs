//! `caught!`: one test per broken store, each requiring the suite to fail
//! the named scenario. The test binary that uses it provides `Flaw` and
//! `async fn failed(Option<Flaw>) -> Vec<&'static str>` (the scenarios the
//! suite failed on a store with that flaw).

macro_rules! caught {
    ($($test:ident: $flaw:ident by $scenario:ident;)+) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $test() {
            let failed = failed(Some(Flaw::$flaw)).await;
            assert!(
                failed.contains(&stringify!($scenario)),
                "the suite must catch {:?} in {}; failed: {failed:?}",
                Flaw::$flaw,
                stringify!($scenario),
            );
        }
    )+};
}

pub(crate) use caught;
