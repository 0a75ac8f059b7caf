//! Unknown tags are answered from the server's view of the tags: a flood of
//! made-up names costs no store call and no memory.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{read_responses, rss_kb, sqlite, Launch, Server};

#[test]
fn a_flood_of_random_tags_makes_no_store_calls_and_keeps_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path(),
        &sqlite(dir.path()),
        &Launch {
            top: "tags_refresh_ms = 1000",
            ..Launch::default()
        },
    );
    assert_eq!(server.get("/alloc?biz_tag=test").0, 200);
    let (loads, lists) = (
        server.metric("workerid_segment_loads_total"),
        server.metric("workerid_tag_lists_total"),
    );
    let rss_before = rss_kb(&server);
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    const ROUNDS: usize = 10;
    const PER_ROUND: usize = 1500;
    for round in 0..ROUNDS {
        let mut requests = String::new();
        for i in 0..PER_ROUND {
            let tag = format!("made-up-{round}-{i}-{:x}", rand_u64());
            let path = match i % 3 {
                0 => format!("/alloc?biz_tag={tag}"),
                1 => format!("/health?biz_tag={tag}"),
                _ => format!("/api/segment/get/{tag}"),
            };
            requests.push_str(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
        }
        stream.write_all(requests.as_bytes()).unwrap();
        for (i, (head, body)) in read_responses(&mut stream, PER_ROUND)
            .into_iter()
            .enumerate()
        {
            match i % 3 {
                2 => assert!(head.starts_with("HTTP/1.1 500"), "{head}"),
                _ => assert!(body.contains("unknown_tag"), "{body}"),
            }
        }
    }
    let elapsed = started.elapsed();
    let (loads_after, lists_after) = (
        server.metric("workerid_segment_loads_total"),
        server.metric("workerid_tag_lists_total"),
    );
    let rss_after = rss_kb(&server);
    println!(
        "{} unknown-tag requests in {elapsed:?}: {} segment loads, {} tag-list reads \
         (the refresh, every 1 s); RSS {rss_before} kB -> {rss_after} kB",
        ROUNDS * PER_ROUND,
        loads_after - loads,
        lists_after - lists,
    );
    assert_eq!(loads_after, loads, "no reservation for an unknown tag");
    assert!(
        lists_after - lists <= elapsed.as_secs() + 3,
        "only the periodic refresh reads the tag list"
    );
    assert_eq!(server.metric("workerid_tags_in_memory"), 1, "only `test`");
    assert_eq!(server.metric("workerid_tags_known"), 2);
    assert!(
        rss_after < rss_before + 16 * 1024,
        "memory grew from {rss_before} kB to {rss_after} kB"
    );
    assert!(server.terminate().success());
}

#[test]
fn a_tag_created_elsewhere_is_served_after_the_next_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path());
    let launch = Launch {
        top: "tags_refresh_ms = 300",
        ..Launch::default()
    };
    let server = Server::launch(dir.path(), &store, &launch);
    let (_, unknown) = server.get("/alloc?biz_tag=late");
    assert!(unknown.contains("unknown tag"), "{unknown}");
    // Another server on the same store creates `late` at its start.
    let other_dir = tempfile::tempdir().unwrap();
    let other = Server::launch(
        other_dir.path(),
        &store,
        &Launch {
            tables: "[[tags]]\nname = \"late\"\n",
            ..Launch::default()
        },
    );
    assert!(other.terminate().success());
    let started = Instant::now();
    let seen = common::wait_for_status(
        &server,
        "/api/segment/get/late",
        200,
        Duration::from_secs(10),
    );
    println!("a tag created elsewhere served after {seen:?} (refresh every 300 ms)");
    assert!(seen.is_some(), "{}", server.log_text());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(server.terminate().success());
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}
