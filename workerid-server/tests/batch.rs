//! Batches over HTTP: `count` (and `format`) on `/alloc` and Leaf's two
//! endpoints, through the fast path and through hyper; a request without
//! `count` answered as go-id-alloc and Leaf answer it; bad counts refused,
//! changing nothing.

mod common;

use common::{sqlite, Launch, Server};

fn ids(body: &str) -> Vec<u64> {
    let inner = body.trim_start_matches('[').trim_end_matches(']');
    inner.split(',').map(|id| id.parse().unwrap()).collect()
}

fn check(server: &Server) {
    assert_eq!(
        server.get("/alloc?biz_tag=test"),
        (200, r#"{"errno":0,"msg":"success","id":1}"#.into())
    );
    assert_eq!(
        server.get("/alloc?biz_tag=test&count=5"),
        (
            200,
            r#"{"errno":0,"msg":"success","ids":[2,3,4,5,6]}"#.into()
        )
    );
    assert_eq!(
        server.get("/alloc?count=3&format=ranges&biz_tag=test"),
        (
            200,
            r#"{"errno":0,"msg":"success","ranges":[[7,9]]}"#.into()
        )
    );
    assert_eq!(
        server.get("/alloc?biz_tag=test&format=ranges"),
        (200, r#"{"errno":0,"msg":"success","id":10}"#.into()),
        "without count, format changes nothing"
    );
    assert_eq!(
        server.get("/api/segment/get/test?count=3"),
        (200, "[11,12,13]".into())
    );
    assert_eq!(server.get("/api/segment/get/test"), (200, "14".into()));
    let refused = r#"{"errno":3,"msg":"count must be a whole number from 1 to 10000","id":0,"code":"invalid_count"}"#;
    for bad in ["0", "-1", "10001", "abc", "", "2.5", "1&count=2"] {
        assert_eq!(
            server.get(&format!("/alloc?biz_tag=test&count={bad}")),
            (400, refused.into()),
            "count={bad}"
        );
        assert_eq!(
            server.get(&format!("/api/segment/get/test?count={bad}")),
            (
                400,
                "invalid_count: count must be a whole number from 1 to 10000".into()
            ),
            "count={bad}"
        );
    }
    assert_eq!(
        server.get("/api/segment/get/test?count=2&format=csv"),
        (400, "invalid_format: format must be array or ranges".into())
    );
    assert_eq!(
        server.get("/alloc?biz_tag=test"),
        (200, r#"{"errno":0,"msg":"success","id":15}"#.into()),
        "refused batches took nothing"
    );
    assert_eq!(
        server.get("/alloc?biz_tag=nope&count=2"),
        (
            500,
            r#"{"errno":2,"msg":"unknown tag \"nope\"","id":0,"code":"unknown_tag"}"#.into()
        )
    );
    // The largest batch: consecutive IDs across segments.
    let (status, body) = server.get("/api/segment/get/test?count=10000");
    assert_eq!(status, 200);
    assert_eq!(ids(&body), (16..10_016).collect::<Vec<_>>());
    assert_eq!(
        server.get("/alloc?biz_tag=test").1,
        r#"{"errno":0,"msg":"success","id":10016}"#
    );

    let (status, body) = server.get("/api/snowflake/get/any?count=500");
    assert_eq!(status, 200, "{body}");
    let snowflakes = ids(&body);
    assert_eq!(snowflakes.len(), 500);
    assert!(
        snowflakes.windows(2).all(|w| w[0] < w[1]),
        "rising, so distinct"
    );
    let (status, body) = server.get("/api/snowflake/get/any?count=500&format=ranges");
    assert_eq!(status, 200, "{body}");
    let runs: Vec<(u64, u64)> = body
        .trim_start_matches("[[")
        .trim_end_matches("]]")
        .split("],[")
        .map(|run| {
            let (first, last) = run.split_once(',').unwrap();
            (first.parse().unwrap(), last.parse().unwrap())
        })
        .collect();
    assert_eq!(runs.iter().map(|(f, l)| l - f + 1).sum::<u64>(), 500);
    assert!(runs[0].0 > *snowflakes.last().unwrap());
    assert_eq!(
        server.get("/api/snowflake/get/any?count=0"),
        (
            400,
            "invalid_count: count must be a whole number from 1 to 10000".into()
        )
    );
    assert_eq!(
        server.metric("workerid_ids_served_total{kind=\"segment\"}"),
        10_016
    );
    assert_eq!(
        server.metric("workerid_ids_served_total{kind=\"snowflake\"}"),
        1_000
    );
}

#[test]
fn batches_through_the_fast_path() {
    let dir = tempfile::tempdir().unwrap();
    check(&Server::start(dir.path()));
}

#[test]
fn batches_through_hyper_and_a_smaller_bound() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path(),
        &sqlite(dir.path()),
        &Launch {
            top: "fast_path = false\nmax_batch = 3",
            ..Launch::default()
        },
    );
    assert_eq!(
        server.get("/alloc?biz_tag=test&count=3"),
        (200, r#"{"errno":0,"msg":"success","ids":[1,2,3]}"#.into())
    );
    assert_eq!(
        server.get("/alloc?biz_tag=test&count=4").0,
        400,
        "past the configured bound"
    );
    assert_eq!(
        server.get("/alloc?biz_tag=test").1,
        r#"{"errno":0,"msg":"success","id":4}"#
    );
}
