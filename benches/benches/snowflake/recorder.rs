//! What a metrics recorder costs one ID (see [`recorder_cost`]).

use std::hint::black_box;
use std::time::{Duration, Instant};

use benches::rounds::{interleaved, median, ratio, Contender};
use ferroid::generator::AtomicSnowflakeGenerator;
use ferroid::time::MonotonicClock;
use workerid::memory::MemoryStore;
use workerid::segment::{SegmentAllocator, SegmentOptions, TagHandle};
use workerid::snowflake::Generator;

use super::{wide_layout, WideId};

/// One ID with and without a metrics recorder (metrics-exporter-prometheus,
/// as the server installs it) beside ferroid, in interleaved rounds: the
/// generators and the segment tag built before the recorder is installed
/// hold no-op handles, those built after record.
pub(super) fn recorder_cost() {
    const ROUNDS: usize = 201;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // One segment of 2^40 IDs: the rounds never switch segments.
    let options = SegmentOptions {
        min_step: Some(1 << 40),
        max_step: 1 << 40,
        ..SegmentOptions::default()
    };
    let tag_on = |segments: &SegmentAllocator| {
        runtime.block_on(async {
            segments.create_tag("bench", 1, 1 << 40).await.expect("tag");
            let tag = segments.tag("bench").expect("tag");
            // The first call installs the segment; the rounds take from it.
            tag.next_id().await.expect("a segment");
            tag
        })
    };
    let ferroid = AtomicSnowflakeGenerator::<WideId, _>::new(1, MonotonicClock::default());
    let plain = Generator::with_system_clock(wide_layout(), 1).expect("generator");
    let plain_segments = SegmentAllocator::new(MemoryStore::new(), options);
    let plain_tag = tag_on(&plain_segments);
    let exporter = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder");
    workerid::observe::describe();
    let recorded = Generator::with_system_clock(wide_layout(), 2).expect("generator");
    let recorded_segments = SegmentAllocator::new(MemoryStore::new(), options);
    let recorded_tag = tag_on(&recorded_segments);
    let mut contenders = [
        Contender {
            name: "workerid `Generator::next_id`, no recorder",
            calls: 100_000,
            call: Box::new(|| {
                generator_id(&plain);
            }),
        },
        Contender {
            name: "workerid `Generator::next_id`, Prometheus recorder",
            calls: 100_000,
            call: Box::new(|| {
                generator_id(&recorded);
            }),
        },
        Contender {
            name: "ferroid `AtomicSnowflakeGenerator`",
            calls: 100_000,
            call: Box::new(|| {
                black_box(ferroid.next_id(|_| std::hint::spin_loop()));
            }),
        },
        Contender {
            name: "workerid segment `TagHandle::try_next_id`, no recorder",
            calls: 100_000,
            call: Box::new(|| {
                segment_id(&plain_tag);
            }),
        },
        Contender {
            name: "workerid segment `TagHandle::try_next_id`, Prometheus recorder",
            calls: 100_000,
            call: Box::new(|| {
                segment_id(&recorded_tag);
            }),
        },
    ];
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(1) {
        interleaved(1, &mut contenders);
    }
    let samples = interleaved(ROUNDS, &mut contenders);
    benches::record::say(format!(
        "\n| one ID with and without a metrics recorder ({ROUNDS} interleaved rounds) \
         | ns per ID, median | × ferroid | × the same without a recorder |"
    ));
    benches::record::say("| --- | --- | --- | --- |");
    let without = [0, 0, 2, 3, 3];
    for ((c, s), &base) in contenders.iter().zip(&samples).zip(&without) {
        benches::record::say(format!(
            "| {} | {:.2} | {:.2}x | {:.3}x |",
            c.name,
            median(s),
            ratio(s, &samples[2]),
            ratio(s, &samples[base])
        ));
    }
    let goal = ratio(&samples[1], &samples[0]).max(ratio(&samples[4], &samples[3]));
    benches::record::say(format!(
        "\n| goal: with the recorder within 5 % of without (the slower of the two) | {goal:.3}x | {} |",
        if goal <= 1.05 { "met" } else { "MISSED" }
    ));
    let text = exporter.render();
    let issued = text
        .lines()
        .find_map(|l| l.strip_prefix("workerid_snowflake_ids_total "))
        .unwrap_or("none");
    benches::record::say(format!(
        "\nThe recorder saw `workerid_snowflake_ids_total` {issued} (IDs of the recorded generator's finished time units)."
    ));
}

/// One ID of `generator`, one copy of the code for both sides of the
/// recorder's comparison: two inlined copies would differ in where they
/// lie in memory, which moves a few-nanosecond figure by more than 5 %.
#[inline(never)]
fn generator_id(generator: &Generator) {
    black_box(generator.next_id().expect("id"));
}

/// One ID of a segment tag, one copy of the code (see [`generator_id`]).
#[inline(never)]
fn segment_id(tag: &TagHandle) {
    black_box(tag.try_next_id().expect("id"));
}
