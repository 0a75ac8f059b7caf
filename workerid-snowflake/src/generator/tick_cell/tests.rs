use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use proptest::prelude::*;
use tokio::sync::Notify;

use super::*;
use crate::clock::{whole_nanos, SteppedAtResync};
use crate::generator::SEALED;
use crate::{Clock, Error, FakeClock, FieldOrder, Generator, Layout, TickingClock, CLASSIC_EPOCH};

const T0: Duration = Duration::from_secs(1_800_000_000);

/// The lag of a clock ticking every hour: no tick comes during a test.
const LAG: Duration = Duration::from_secs(7_200);

fn layouts() -> Vec<Layout> {
    vec![
        Layout::classic(),
        Layout::sonyflake(),
        Layout::classic().with_field_order(FieldOrder::SequenceThenWorker),
        Layout::new(41, 2, 20, Duration::from_millis(1), CLASSIC_EPOCH).expect("layout"),
        Layout::new(41, 1, 21, Duration::from_millis(1), CLASSIC_EPOCH).expect("layout"),
    ]
}

proptest! {
    /// The fast path's one comparison is its rule: `last` in the floor's
    /// unit, with its worker field whole and a sequence number left, for
    /// every value `last` takes (packed ones, an increment carried out of a
    /// full sequence, sealed ones); a cell that admits nothing admits none.
    #[test]
    fn the_floor_admits_exactly_the_issuable_values_of_its_unit(
        layout in 0..5usize,
        worker in any::<u32>(),
        unit in any::<u64>(),
        offset in 0u64..5,
        seq in any::<u64>(),
        above_sealed in 0u64..1_000,
    ) {
        let layout = layouts()[layout];
        let packing = Packing::new(&layout, worker % (layout.max_worker_id() + 1));
        let unit = 2 + unit % (layout.max_timestamp() - 4);
        let ts = unit + offset - 2;
        let seq = seq % (layout.max_sequence() + 1);
        let floor = packing.pack(unit, 0);
        let values = [
            packing.pack(ts, seq),
            packing.pack(ts, layout.max_sequence()) + packing.step(),
            packing.pack(0, 0),
            SEALED + above_sealed,
        ];
        for last in values {
            let rule = last < SEALED && packing.ts(last) == unit && packing.issuable(last);
            prop_assert_eq!(admitted(last, floor, packing.seq_limit()), rule, "last {:#x}", last);
            prop_assert!(!admitted(last, ADMITS_NOTHING, packing.seq_limit()));
        }
    }
}

fn cell(generator: &Generator) -> &Arc<TickCell> {
    generator
        .tick_cell()
        .expect("a ticking clock's generator has a cell")
}

/// The floor of the unit a wall time is in.
fn floor_at(generator: &Generator, wall: Duration) -> u64 {
    generator.unit_floor(generator.unit_at(whole_nanos(wall)))
}

/// A worker's generator on a ticking clock that does not tick during the
/// test, over a fake clock.
fn worker_generator(base: &Arc<FakeClock>) -> Arc<Generator> {
    let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_secs(3_600)));
    let generator = Generator::new(Layout::classic(), 5, clock).unwrap();
    Arc::new(generator.closed(Arc::new(Notify::new())))
}

#[test]
fn the_fast_path_is_open_only_while_the_lease_is_live_and_the_window_open() {
    let base = Arc::new(FakeClock::at(T0));
    let g = worker_generator(&base);
    assert_eq!(cell(&g).floor(), ADMITS_NOTHING, "closed from the start");
    assert!(matches!(g.next_id(), Err(Error::NotReady { .. })));

    let max = Layout::classic().max_timestamp();
    let now = base.now();
    g.open_until(now.mono + LAG + Duration::from_secs(60), max);
    assert_eq!(cell(&g).floor(), floor_at(&g, now.wall), "open at once");
    g.next_id().unwrap();
    assert!(cell(&g).admits(g.last.load(Ordering::SeqCst)));

    g.close();
    assert_eq!(cell(&g).floor(), ADMITS_NOTHING, "closed at once");
    assert!(matches!(g.next_id(), Err(Error::NotReady { .. })));

    // Within the stored time's lag of the deadline the lease is not surely
    // live by that time: the fast path refuses, the precise clock decides.
    g.open_until(now.mono + LAG, max);
    assert_eq!(cell(&g).floor(), ADMITS_NOTHING);
    g.next_id().unwrap();

    // A window that ends before the stored time's unit.
    let unit = g.unit_at(whole_nanos(now.wall));
    g.open_until(now.mono + LAG + Duration::from_secs(60), unit - 1);
    assert_eq!(cell(&g).floor(), ADMITS_NOTHING);
    let refused = g.next_id();
    assert!(
        matches!(&refused, Err(Error::NotReady { reason }) if reason.contains("window")),
        "{refused:?}"
    );
}

#[test]
fn the_ticker_moves_the_floor_to_the_clocks_new_unit() {
    let base = Arc::new(FakeClock::at(T0));
    let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_micros(100)));
    let g = Generator::new(Layout::classic(), 5, clock).unwrap();
    g.next_id().unwrap();
    base.advance(Duration::from_millis(5));
    let later = floor_at(&g, T0 + Duration::from_millis(5));
    let waited = Instant::now();
    while cell(&g).floor() != later {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the ticker never moved the floor"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let id = g.next_id().unwrap();
    assert_eq!(
        Layout::classic().decompose(id).time,
        UNIX_EPOCH + T0 + Duration::from_millis(5)
    );
}

#[test]
fn a_resync_moves_the_floor_back_at_once() {
    let base = Arc::new(SteppedAtResync::at(T0));
    let clock = Arc::new(TickingClock::over(base.clone(), Duration::from_secs(3_600)));
    let g = Generator::new(Layout::classic(), 5, clock.clone()).unwrap();
    g.next_id().unwrap();
    assert_eq!(cell(&g).floor(), floor_at(&g, T0));
    base.pending_ms.store(-2_000, Ordering::SeqCst);
    clock.resync();
    assert_eq!(
        cell(&g).floor(),
        floor_at(&g, T0 - Duration::from_secs(2)),
        "the wall clock set back is the floor's at once, not at the next tick"
    );
    assert!(!cell(&g).admits(g.last.load(Ordering::SeqCst)));
}
