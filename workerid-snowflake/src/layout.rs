//! The bit layout of a snowflake ID.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Error, Result};

/// How long the timestamp field must last from now, at least.
pub(crate) const MIN_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The fields of a snowflake ID, from the top: a zero sign bit, the timestamp
/// (in `unit`s since `epoch`), the worker ID, the sequence.
///
/// ```
/// use workerid_snowflake::Layout;
/// let classic = Layout::classic();
/// assert_eq!((classic.timestamp_bits(), classic.worker_bits(), classic.sequence_bits()), (41, 10, 12));
/// let id = classic.compose(1_000, 7, 3);
/// let parts = classic.decompose(id);
/// assert_eq!((parts.timestamp, parts.worker_id, parts.sequence), (1_000, 7, 3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    timestamp_bits: u8,
    worker_bits: u8,
    sequence_bits: u8,
    unit: Duration,
    epoch: Duration,
    order: FieldOrder,
}

/// Which of the worker ID and the sequence comes first below the timestamp.
/// Either way one worker's IDs rise with time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldOrder {
    /// timestamp | worker ID | sequence: Twitter's and most snowflakes'.
    #[default]
    WorkerThenSequence,
    /// timestamp | sequence | worker ID: Sonyflake's.
    SequenceThenWorker,
}

/// A snowflake ID taken apart by [`Layout::decompose`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// The timestamp field, in the layout's units since its epoch.
    pub timestamp: u64,
    /// The wall-clock time it stands for.
    pub time: SystemTime,
    /// The worker ID.
    pub worker_id: u32,
    /// The sequence number within the time unit.
    pub sequence: u64,
}

/// 2024-01-01T00:00:00Z, the epoch of [`Layout::classic`].
pub const CLASSIC_EPOCH: Duration = Duration::from_secs(1_704_067_200);
/// 2014-09-01T00:00:00Z, Sonyflake's epoch.
pub const SONYFLAKE_EPOCH: Duration = Duration::from_secs(1_409_529_600);
/// 2025-01-01T00:00:00Z, Sonyflake v2's default epoch.
pub const SONYFLAKE_V2_EPOCH: Duration = Duration::from_secs(1_735_689_600);
/// 2010-11-04T01:42:54.657Z, Twitter's snowflake epoch.
pub const TWITTER_EPOCH: Duration = Duration::from_millis(1_288_834_974_657);
/// 2015-01-01T00:00:00Z, Discord's epoch.
pub const DISCORD_EPOCH: Duration = Duration::from_millis(1_420_070_400_000);
/// 2011-08-24T21:07:01.721Z, the epoch of Instagram's sharded IDs.
pub const INSTAGRAM_EPOCH: Duration = Duration::from_millis(1_314_220_021_721);

impl Layout {
    /// The classic layout: 41 bits of milliseconds since 2024-01-01 (until
    /// 2093), 10 worker bits, 12 sequence bits (4096 IDs per millisecond).
    pub fn classic() -> Layout {
        Layout {
            timestamp_bits: 41,
            worker_bits: 10,
            sequence_bits: 12,
            unit: Duration::from_millis(1),
            epoch: CLASSIC_EPOCH,
            order: FieldOrder::WorkerThenSequence,
        }
    }

    /// Sonyflake's layout (v1, `github.com/sony/sonyflake`): 39 bits of
    /// 10 ms units since 2014-09-01 (174 years), then 8 sequence bits, then
    /// 16 machine bits, the sequence above the machine ID as Sonyflake puts
    /// it (25 600 IDs per second per worker). Decodes Sonyflake's IDs.
    ///
    /// ```
    /// use workerid_snowflake::Layout;
    /// // Sonyflake's own formula: time << 24 | sequence << 16 | machine.
    /// let id = (1_000_000u64 << 24) | (3 << 16) | 4355;
    /// let parts = Layout::sonyflake().decompose(id);
    /// assert_eq!((parts.timestamp, parts.worker_id, parts.sequence), (1_000_000, 4355, 3));
    /// assert_eq!(Layout::sonyflake().compose(1_000_000, 4355, 3), id);
    /// ```
    pub fn sonyflake() -> Layout {
        Layout {
            timestamp_bits: 39,
            worker_bits: 16,
            sequence_bits: 8,
            unit: Duration::from_millis(10),
            epoch: SONYFLAKE_EPOCH,
            order: FieldOrder::SequenceThenWorker,
        }
    }

    /// Sonyflake v2's default layout (`github.com/sony/sonyflake/v2`): as
    /// [`Layout::sonyflake`], with its epoch moved to 2025-01-01.
    pub fn sonyflake_v2() -> Layout {
        Layout {
            epoch: SONYFLAKE_V2_EPOCH,
            ..Layout::sonyflake()
        }
    }

    /// Twitter's original snowflake: 41 bits of milliseconds since
    /// 2010-11-04T01:42:54.657Z (until 2080), 10 worker bits, 12 sequence
    /// bits. Decodes tweet IDs.
    ///
    /// ```
    /// use workerid_snowflake::{Layout, TWITTER_EPOCH};
    /// let parts = Layout::twitter().decompose(1_541_815_603_606_036_480);
    /// assert_eq!((parts.timestamp, parts.worker_id, parts.sequence), (367_597_485_448, 378, 0));
    /// // 2022-06-28T16:07:40.105Z
    /// let ms = parts.time.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    /// assert_eq!(ms, 1_656_432_460_105);
    /// ```
    pub fn twitter() -> Layout {
        Layout {
            epoch: TWITTER_EPOCH,
            ..Layout::classic()
        }
    }

    /// Discord's snowflake: milliseconds since 2015-01-01, 10 worker bits
    /// (Discord's 5 worker and 5 process bits, read as one field: worker
    /// ID 1, process 0 is 32), 12 sequence bits. Discord's timestamp field
    /// is 42 bits wide; its top bit stays 0 until 2084, so 41 bits decode
    /// every Discord ID until then.
    ///
    /// ```
    /// use workerid_snowflake::Layout;
    /// let parts = Layout::discord().decompose(175_928_847_299_117_063);
    /// assert_eq!((parts.timestamp, parts.worker_id, parts.sequence), (41_944_705_796, 32, 7));
    /// ```
    pub fn discord() -> Layout {
        Layout {
            epoch: DISCORD_EPOCH,
            ..Layout::classic()
        }
    }

    /// Instagram's sharded IDs: milliseconds since 2011-08-24T21:07:01.721Z,
    /// 13 bits of logical shard (the worker ID here), 10 bits of sequence.
    /// Instagram gives the timestamp 41 bits in a 64-bit ID; with the top
    /// bit kept clear it has 40, which last until 2046 (and decode every
    /// Instagram ID until then).
    pub fn instagram() -> Layout {
        Layout {
            timestamp_bits: 40,
            worker_bits: 13,
            sequence_bits: 10,
            unit: Duration::from_millis(1),
            epoch: INSTAGRAM_EPOCH,
            order: FieldOrder::WorkerThenSequence,
        }
    }

    /// IDs below 2^53, which a JavaScript number holds exactly: 38 bits of
    /// 10 ms since 2024-01-01 (until 2111), 8 worker bits (256 workers), 7
    /// sequence bits (12 800 IDs a second per worker). The price of 53 bits
    /// against 63: a coarser unit, a smaller pool, a lower rate.
    ///
    /// ```
    /// use workerid_snowflake::Layout;
    /// let js = Layout::javascript_safe();
    /// let largest = js.compose(js.max_timestamp(), js.max_worker_id(), js.max_sequence());
    /// assert!(largest < 1 << 53);
    /// ```
    pub fn javascript_safe() -> Layout {
        Layout {
            timestamp_bits: 38,
            worker_bits: 8,
            sequence_bits: 7,
            unit: Duration::from_millis(10),
            epoch: CLASSIC_EPOCH,
            order: FieldOrder::WorkerThenSequence,
        }
    }

    /// The names [`Layout::preset`] knows, in the order of the presets above.
    pub const PRESETS: [&'static str; 7] = [
        "classic",
        "sonyflake",
        "sonyflake-v2",
        "twitter",
        "discord",
        "instagram",
        "js-safe",
    ];

    /// The preset named `name`, one of [`Layout::PRESETS`]: `classic`,
    /// `sonyflake`, `sonyflake-v2`, `twitter` (also Leaf's snowflake
    /// layout), `discord`, `instagram`, `js-safe`
    /// ([`javascript_safe`](Layout::javascript_safe)); `None` for any other.
    ///
    /// ```
    /// use workerid_snowflake::Layout;
    /// assert_eq!(Layout::preset("twitter"), Some(Layout::twitter()));
    /// assert_eq!(Layout::preset("Twitter"), None);
    /// ```
    pub fn preset(name: &str) -> Option<Layout> {
        Some(match name {
            "classic" => Layout::classic(),
            "sonyflake" => Layout::sonyflake(),
            "sonyflake-v2" => Layout::sonyflake_v2(),
            "twitter" => Layout::twitter(),
            "discord" => Layout::discord(),
            "instagram" => Layout::instagram(),
            "js-safe" => Layout::javascript_safe(),
            _ => return None,
        })
    }

    /// A custom layout; `epoch` is the time since the Unix epoch where the
    /// timestamp field starts and `unit` the field's unit, each a whole
    /// number of milliseconds (the watermarks a worker hands over are whole
    /// milliseconds, so an epoch between two would let the next holder of a
    /// worker ID start in the last holder's unit).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when a field is empty, the three fields need
    /// more than 63 bits, the worker field is wider than 22 bits, the unit or
    /// the epoch is not a whole number of milliseconds, the epoch is in the
    /// future, or the timestamp field runs out within 10 years (the message
    /// says when).
    pub fn new(
        timestamp_bits: u8,
        worker_bits: u8,
        sequence_bits: u8,
        unit: Duration,
        epoch: Duration,
    ) -> Result<Layout> {
        let layout = Layout {
            timestamp_bits,
            worker_bits,
            sequence_bits,
            unit,
            epoch,
            order: FieldOrder::WorkerThenSequence,
        };
        layout.validate(SystemTime::now())?;
        Ok(layout)
    }

    pub(crate) fn validate(&self, now: SystemTime) -> Result<()> {
        let total = u32::from(self.timestamp_bits)
            + u32::from(self.worker_bits)
            + u32::from(self.sequence_bits);
        if self.timestamp_bits == 0 || self.worker_bits == 0 || self.sequence_bits == 0 {
            return Err(Error::invalid_config(
                "every field of a layout needs at least one bit",
            ));
        }
        if total > 63 {
            return Err(Error::invalid_config(format!(
                "the layout needs {total} bits ({} + {} + {}); a snowflake ID has 63",
                self.timestamp_bits, self.worker_bits, self.sequence_bits
            )));
        }
        if self.worker_bits > workerid_core::MAX_WORKER_BITS {
            return Err(Error::invalid_config(format!(
                "{} worker bits: worker IDs have at most {}",
                self.worker_bits,
                workerid_core::MAX_WORKER_BITS
            )));
        }
        if self.unit.is_zero() || !self.unit.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(Error::invalid_config(format!(
                "the time unit {:?} is not a whole number of milliseconds",
                self.unit
            )));
        }
        if !self.epoch.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(Error::invalid_config(format!(
                "the epoch {:?} after 1970 is not a whole number of milliseconds",
                self.epoch
            )));
        }
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        if self.epoch > now {
            return Err(Error::invalid_config(format!(
                "the epoch ({}) is in the future",
                format_date(self.epoch)
            )));
        }
        let end = self.epoch + self.span();
        if end < now + MIN_LIFETIME {
            return Err(Error::invalid_config(format!(
                "the {}-bit timestamp field of {:?} units from {} runs out on {}, within 10 years",
                self.timestamp_bits,
                self.unit,
                format_date(self.epoch),
                format_date(end)
            )));
        }
        Ok(())
    }

    /// How much time the timestamp field covers.
    pub fn span(&self) -> Duration {
        let units = 1u128 << self.timestamp_bits;
        let nanos = units.saturating_mul(self.unit.as_nanos());
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// When the timestamp field runs out.
    pub fn end(&self) -> SystemTime {
        UNIX_EPOCH + self.epoch + self.span()
    }

    /// Timestamp bits.
    pub fn timestamp_bits(&self) -> u8 {
        self.timestamp_bits
    }

    /// Worker-ID bits.
    pub fn worker_bits(&self) -> u8 {
        self.worker_bits
    }

    /// Sequence bits.
    pub fn sequence_bits(&self) -> u8 {
        self.sequence_bits
    }

    /// The time unit.
    pub fn unit(&self) -> Duration {
        self.unit
    }

    /// The epoch, as time since the Unix epoch.
    pub fn epoch(&self) -> Duration {
        self.epoch
    }

    /// The largest worker ID the layout holds.
    pub fn max_worker_id(&self) -> u32 {
        ((1u64 << self.worker_bits) - 1) as u32
    }

    /// The largest sequence number.
    pub fn max_sequence(&self) -> u64 {
        (1u64 << self.sequence_bits) - 1
    }

    /// The largest timestamp value.
    pub fn max_timestamp(&self) -> u64 {
        (1u64 << self.timestamp_bits) - 1
    }

    /// The largest ID of this layout: every field at its largest. A larger
    /// value was not made with this layout.
    ///
    /// ```
    /// use workerid_snowflake::Layout;
    /// assert_eq!(Layout::classic().max_id(), (1 << 63) - 1);
    /// ```
    pub fn max_id(&self) -> u64 {
        let width = u32::from(self.timestamp_bits)
            + u32::from(self.worker_bits)
            + u32::from(self.sequence_bits);
        u64::MAX >> (64 - width.clamp(1, 64))
    }

    /// IDs per second one worker can issue at most.
    pub fn ids_per_second(&self) -> f64 {
        (self.max_sequence() + 1) as f64 / self.unit.as_secs_f64()
    }

    /// The timestamp (in units) of `wall` (time since the Unix epoch); `None`
    /// before the epoch. A time too far out for a u64 of units gives
    /// `u64::MAX`, past every layout's last timestamp.
    pub fn timestamp_at(&self, wall: Duration) -> Option<u64> {
        let since = wall.checked_sub(self.epoch)?;
        Some(u64::try_from(since.as_nanos() / self.unit.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The time (since the Unix epoch) where timestamp `ts` starts.
    pub fn time_of(&self, ts: u64) -> Duration {
        let nanos = u128::from(ts).saturating_mul(self.unit.as_nanos());
        self.epoch + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The same widths and epoch with the worker ID and the sequence in
    /// `order`.
    pub fn with_field_order(mut self, order: FieldOrder) -> Layout {
        self.order = order;
        self
    }

    /// Which of the worker ID and the sequence comes first.
    pub fn field_order(&self) -> FieldOrder {
        self.order
    }

    /// How far left the worker ID and the sequence sit.
    pub(crate) fn shifts(&self) -> (u32, u32) {
        let (worker, sequence) = (u32::from(self.worker_bits), u32::from(self.sequence_bits));
        match self.order {
            FieldOrder::WorkerThenSequence => (sequence, 0),
            FieldOrder::SequenceThenWorker => (0, worker),
        }
    }

    /// Puts the fields together (each is masked to its width).
    pub fn compose(&self, timestamp: u64, worker_id: u32, sequence: u64) -> u64 {
        let (shift_worker, shift_sequence) = self.shifts();
        let shift_time = u32::from(self.sequence_bits) + u32::from(self.worker_bits);
        ((timestamp & self.max_timestamp()) << shift_time)
            | ((u64::from(worker_id) & u64::from(self.max_worker_id())) << shift_worker)
            | ((sequence & self.max_sequence()) << shift_sequence)
    }

    /// Takes an ID apart.
    pub fn decompose(&self, id: u64) -> Parts {
        let (shift_worker, shift_sequence) = self.shifts();
        let shift_time = u32::from(self.sequence_bits) + u32::from(self.worker_bits);
        let timestamp = (id >> shift_time) & self.max_timestamp();
        Parts {
            timestamp,
            time: UNIX_EPOCH + self.time_of(timestamp),
            worker_id: ((id >> shift_worker) & u64::from(self.max_worker_id())) as u32,
            sequence: (id >> shift_sequence) & self.max_sequence(),
        }
    }
}

/// `YYYY-MM-DD` (UTC) of a time since the Unix epoch.
pub(crate) fn format_date(since_epoch: Duration) -> String {
    // Civil-from-days, Howard Hinnant's algorithm.
    let days = (since_epoch.as_secs() / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests;
