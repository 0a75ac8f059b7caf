//! How the generator's `last` holds the timestamp and sequence number of
//! the last ID: in the ID's own bit positions, with every bit of the worker
//! field set. The ID is then `last` with the worker field's bits flipped to
//! the worker ID (one exclusive or on the hot path, no shifts or masks),
//! and an increment that overflows the sequence carries through the set
//! bits into the timestamp, as it would with the two fields side by side.

use super::Layout;

/// The positions of a layout's fields in `last`, for one worker ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packing {
    ts_shift: u32,
    seq_shift: u32,
    seq_bits: u32,
    max_seq: u64,
    /// The worker field, every bit set.
    fill: u64,
    /// The bits below the timestamp.
    below_ts: u64,
    /// The largest sequence number in place.
    seq_limit: u64,
    /// `seq_limit` less `step`.
    seq_limit_but_last: u64,
    /// One sequence number in place.
    step: u64,
    /// `fill` with the worker ID's bits cleared: `last ^ flip` is the ID.
    flip: u64,
}

impl Packing {
    /// The packing of `layout` for `worker_id` (which fits its field).
    pub(crate) fn new(layout: &Layout, worker_id: u32) -> Self {
        let (seq_bits, worker_bits) = (
            u32::from(layout.sequence_bits()),
            u32::from(layout.worker_bits()),
        );
        let (worker_shift, seq_shift) = layout.shifts();
        let fill = u64::from(layout.max_worker_id()) << worker_shift;
        Packing {
            ts_shift: seq_bits + worker_bits,
            seq_shift,
            seq_bits,
            max_seq: layout.max_sequence(),
            fill,
            below_ts: (1 << (seq_bits + worker_bits)) - 1,
            seq_limit: layout.max_sequence() << seq_shift,
            seq_limit_but_last: (layout.max_sequence() << seq_shift) - (1 << seq_shift),
            step: 1 << seq_shift,
            flip: fill ^ (u64::from(worker_id) << worker_shift),
        }
    }

    /// The value of `last` for the ID of `ts` and `seq`.
    #[inline]
    pub(crate) fn pack(&self, ts: u64, seq: u64) -> u64 {
        (ts << self.ts_shift) | self.fill | (seq << self.seq_shift)
    }

    /// The timestamp of a value of `last`.
    #[inline(always)]
    pub(crate) fn ts(&self, last: u64) -> u64 {
        last >> self.ts_shift
    }

    /// The sequence number of a value of `last`.
    #[inline]
    pub(crate) fn seq(&self, last: u64) -> u64 {
        (last >> self.seq_shift) & self.max_seq
    }

    /// Whether the fast path may increment a value of `last`: its worker
    /// field's bits all set and its sequence number not the unit's last.
    /// A value an overflowing increment made (the sequence and the worker
    /// field carried into the timestamp, so zero) is not: only
    /// [`claim`](super::Generator::claim) goes on from it.
    #[inline(always)]
    pub(crate) fn issuable(&self, last: u64) -> bool {
        (last & self.below_ts).wrapping_sub(self.fill) < self.seq_limit
    }

    /// The largest sequence number in place: a value of `last` less its
    /// unit's sequence-0 value is below it when it is issuable.
    #[inline(always)]
    pub(crate) fn seq_limit(&self) -> u64 {
        self.seq_limit
    }

    /// [`seq_limit`](Packing::seq_limit) less one [`step`](Packing::step):
    /// a value of `last` less its unit's sequence-0 value is below it when
    /// a sequence number of the unit follows it.
    #[inline(always)]
    pub(crate) fn seq_limit_but_last(&self) -> u64 {
        self.seq_limit_but_last
    }

    /// What one increment of the sequence adds to `last`.
    #[inline(always)]
    pub(crate) fn step(&self) -> u64 {
        self.step
    }

    /// The largest value of `last` in the unit of `last`: an increment of
    /// it above this overflowed the sequence (`last` never goes down).
    #[inline(always)]
    pub(crate) fn unit_end(&self, last: u64) -> u64 {
        last | self.below_ts
    }

    /// The ID of a value of `last` (that is not sealed).
    #[inline(always)]
    pub(crate) fn id(&self, last: u64) -> u64 {
        last ^ self.flip
    }

    /// A value of `last` as `(timestamp << sequence bits) | sequence`, the
    /// terms the meters count units in.
    #[inline]
    pub(crate) fn dense(&self, last: u64) -> u64 {
        (self.ts(last) << self.seq_bits) | self.seq(last)
    }
}

/// Whether `last` is a value in the unit whose sequence-0 value of `last`
/// is `base`, below the sequence number `seq_limit` in place (see
/// [`Packing::seq_limit`]): one subtraction and one comparison. What the
/// system clock's gate and the ticking clock's cell both judge an
/// increment by. Values past the unit, carried out of it, in an earlier
/// unit or sealed are not; with `base` at `seq_limit`'s negation (the
/// ticking cell's "nothing"), only values within `seq_limit` of 2^64,
/// which `last` never reaches (see `SEALED`).
#[inline(always)]
pub(crate) fn in_unit(last: u64, base: u64, seq_limit: u64) -> bool {
    last.wrapping_sub(base) < seq_limit
}

/// Values `last` takes around unit `ts` of `layout`, packed as `packing`
/// packs them, for tests of what a fast path admits: sequence number `seq`
/// of the unit, the unit's last, `carries` increments past it (carried into
/// the next unit with the worker field cleared), the same past the layout's
/// last unit, the first value of all, and sealed values moved on by racing
/// increments.
#[cfg(test)]
pub(crate) fn values_of_last(
    layout: &Layout,
    packing: &Packing,
    ts: u64,
    seq: u64,
    carries: u64,
    above_sealed: u64,
) -> [u64; 7] {
    let full = packing.pack(ts, layout.max_sequence());
    [
        packing.pack(ts, seq % (layout.max_sequence() + 1)),
        full,
        full + carries * packing.step(),
        packing.pack(layout.max_timestamp(), layout.max_sequence()) + carries * packing.step(),
        packing.pack(0, 0),
        super::SEALED + above_sealed,
        super::SEALED + carries * packing.step(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::layouts;
    use crate::FieldOrder;

    #[test]
    fn the_id_is_the_layouts_composition() {
        for layout in layouts() {
            for worker in [0, 1, layout.max_worker_id() / 2, layout.max_worker_id()] {
                let p = Packing::new(&layout, worker);
                for (ts, seq) in [(0, 0), (1, 0), (5, 1), (1 << 30, layout.max_sequence())] {
                    let last = p.pack(ts, seq);
                    assert_eq!(
                        p.id(last),
                        layout.compose(ts, worker, seq),
                        "{layout:?} {worker}"
                    );
                    assert_eq!((p.ts(last), p.seq(last)), (ts, seq));
                    assert_eq!(p.dense(last), (ts << layout.sequence_bits()) | seq);
                    assert_eq!(p.issuable(last), seq < layout.max_sequence());
                }
            }
        }
    }

    #[test]
    fn an_increment_moves_the_sequence_and_an_overflow_the_timestamp() {
        for layout in layouts() {
            let p = Packing::new(&layout, layout.max_worker_id() / 3);
            let last = p.pack(7, 3);
            assert_eq!(last + p.step(), p.pack(7, 4));
            assert!(last + p.step() <= p.unit_end(last));
            let full = p.pack(7, layout.max_sequence());
            let carried = full + p.step();
            assert_eq!((p.ts(carried), p.seq(carried)), (8, 0), "{layout:?}");
            assert!(carried > p.unit_end(full));
            assert!(
                carried <= p.pack(8, 0),
                "never above the next unit's first ID"
            );
            // The worker field carried too (when it is below the sequence
            // it cannot): an increment of it would have another worker's ID.
            let field_carried = carried & p.fill != p.fill;
            assert_eq!(p.issuable(carried), !field_carried, "{layout:?}");
            assert_eq!(
                field_carried,
                layout.field_order() == FieldOrder::WorkerThenSequence
            );
            assert!(
                p.pack(7, 0) > p.pack(6, layout.max_sequence()),
                "ordered as (ts, seq)"
            );
        }
    }
}
