//! The scale program runs end to end with a handful of workers and reports
//! no lapse. Not timed: nothing here checks how fast anything was.

use std::time::Duration;

use workerid_scale::{ramp, Connect, Settings, StoreKind, Target};

fn tiny() -> Settings {
    Settings {
        // Long enough that a loaded CI machine does not lose a lease (a
        // lost worker cannot release, and the last check counts releases).
        ttl: Duration::from_secs(4),
        steady: Duration::from_secs(2),
        churn: Duration::from_millis(1500),
        churn_fraction: 0.25,
        churn_every: Duration::from_millis(500),
        worker_bits: 4,
        fill: 0.5,
        concurrency: 4,
        spread_joins: true,
        // Not timed: a slow machine must not fail this test.
        behind_below: 0.0,
        window_periods: None,
    }
}

async fn runs_without_lapses(kind: StoreKind) {
    let target = Target::start(kind, Connect::default())
        .await
        .expect("store");
    let steps = ramp(&target, &[20], &tiny(), |_| {}).await.expect("ramp");
    assert_eq!(steps.len(), 1);
    let step = &steps[0];
    // 20 workers over namespaces of 8 (half of 2^4).
    assert_eq!(step.namespaces, 3);
    assert_eq!(step.live, 20, "{step:?}");
    assert_eq!(step.join_failures, 0, "{step:?}");
    assert_eq!(step.join_lapses, 0, "{step:?}");
    assert_eq!(step.steady.lapses, 0, "{step:?}");
    assert!(step.steady.renews_per_sec > 0.0, "{step:?}");
    let churn = step.churn.as_ref().expect("a churn window");
    assert!(churn.cycles >= 1 && churn.stopped >= 5, "{churn:?}");
    assert_eq!(churn.joined, churn.stopped, "{churn:?}");
    assert_eq!(churn.window.lapses, 0, "{churn:?}");
    assert_eq!(churn.join_failures, 0, "{churn:?}");
    // Every worker released its ID at the end: the store counted the releases.
    assert!(target.stats().counters().releases >= 20 + churn.stopped as u64);
    let svg = workerid_scale::plot::svg(&[(target.kind, steps.clone())]).expect("a plot");
    assert!(svg.starts_with("<svg"), "{svg:.200}");
    for text in [
        "Renewals per second held",
        "Renew p99",
        "live workers",
        target.kind.title(),
    ] {
        assert!(svg.contains(text), "the plot lacks {text:?}");
    }
    assert!(
        svg.contains("<polyline") || svg.contains("<path"),
        "no line drawn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store() {
    runs_without_lapses(StoreKind::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store() {
    runs_without_lapses(StoreKind::Sqlite).await;
}
