//! Lease traffic has its own store connection: a flood of requests for
//! made-up tags does not starve the snowflake worker's renewals.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Launch, Server};
use workerid_testkit::StoreKind;

#[test]
fn a_flood_of_unknown_tags_does_not_cost_the_lease() {
    let store = StoreKind::Postgres.shared_url();
    let dir = tempfile::tempdir().unwrap();
    let namespace = format!("flood-{}", std::process::id());
    let tables = format!("[snowflake]\nttl_secs = 2\nnamespace = \"{namespace}\"\n");
    let server = Arc::new(Server::launch(
        dir.path(),
        &store,
        &Launch {
            tables: &tables,
            ..Launch::default()
        },
    ));
    assert_eq!(server.get("/api/snowflake/get/x").0, 200);

    let flooding = Arc::new(AtomicBool::new(true));
    let sent = Arc::new(AtomicU64::new(0));
    let flooders: Vec<_> = (0..12)
        .map(|t| {
            let (server, flooding, sent) = (server.clone(), flooding.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while flooding.load(Ordering::Relaxed) {
                    n += 1;
                    let tag = format!("nope-{t}-{n}-{}", std::process::id());
                    if server
                        .try_get(&format!("/alloc?biz_tag={tag}"), &[])
                        .is_ok()
                    {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // Three ttls of flood, the worker asked for an ID every 100 ms meanwhile.
    let started = Instant::now();
    let (mut asked, mut refused) = (0, 0);
    while started.elapsed() < Duration::from_secs(6) {
        asked += 1;
        if server.get("/api/snowflake/get/x").0 != 200 {
            refused += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    flooding.store(false, Ordering::Relaxed);
    for flooder in flooders {
        flooder.join().unwrap();
    }
    let sent = sent.load(Ordering::Relaxed);
    println!(
        "{sent} requests for unknown tags in {:?}; snowflake refused {refused} of {asked}",
        started.elapsed()
    );
    assert!(sent > 100, "the flood ran");
    assert_eq!(refused, 0, "{}", server.log_text());
    assert_eq!(server.metric("workerid_lease_losses_total"), 0);
    assert_eq!(server.metric("workerid_lease_joins_total"), 1);
    let server = Arc::into_inner(server).unwrap();
    assert!(server.terminate().success());
}
