//! What a store acknowledged under load, and the two ways an acknowledged
//! write that was lost shows afterwards: segment IDs handed out twice (a
//! reservation lost, its range reserved again) and a worker ID granted with
//! a fence not above an earlier grant's (a grant lost). Used by the tests
//! that fill a store's disk and fail a replicated store over.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use workerid::segment::{Error as SegmentError, SegmentStore, Tag};
use workerid::{Error, Holder, LeaseStore, Namespace, Token};

/// Acknowledged reservations and grants, in the order they were answered.
#[derive(Debug, Default, Clone)]
pub struct Acknowledged {
    /// Segment ranges: (first, last).
    pub ranges: Vec<(u64, u64)>,
    /// Grants: (worker ID, fence).
    pub grants: Vec<(u32, u64)>,
}

impl Acknowledged {
    /// How many segment IDs are in more than one acknowledged range.
    pub fn repeated_segment_ids(&self) -> u64 {
        let mut ranges = self.ranges.clone();
        ranges.sort_unstable();
        let (mut repeated, mut reach) = (0u64, 0u64);
        for (first, last) in ranges {
            if first <= reach {
                repeated += reach.min(last) - first + 1;
            }
            reach = reach.max(last);
        }
        repeated
    }

    /// How many grants have a fence not above the previous acknowledged
    /// grant of their worker ID.
    pub fn fences_gone_back(&self) -> usize {
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        self.grants
            .iter()
            .filter(|&&(id, fence)| last.insert(id, fence).is_some_and(|before| fence <= before))
            .count()
    }
}

/// When a call of a load loop began and when its answer came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// When the call was made.
    pub began: Instant,
    /// When its answer came.
    pub answered: Instant,
}

impl Call {
    /// A call that began at `began` and is answered now.
    fn answered_now(began: Instant) -> Call {
        Call {
            began,
            answered: Instant::now(),
        }
    }

    /// How long the call took.
    pub fn took(&self) -> Duration {
        self.answered.saturating_duration_since(self.began)
    }
}

/// How one call of a load loop ended.
#[derive(Debug)]
pub enum Answer {
    /// A reservation acknowledged: (first, last), and the call.
    Reserved((u64, u64), Call),
    /// A grant acknowledged: (worker ID, fence), and the call.
    Granted((u32, u64), Call),
    /// A call refused or failed: which call, and `"unavailable"` or the
    /// error's debug form.
    Failed(&'static str, String),
}

fn kind_of_lease_error(e: &Error) -> String {
    match e {
        Error::Unavailable { .. } => "unavailable".into(),
        other => format!("{other:?}"),
    }
}

fn kind_of_segment_error(e: &SegmentError) -> String {
    match e {
        SegmentError::Unavailable { .. } => "unavailable".into(),
        other => format!("{other:?}"),
    }
}

/// Reserves from `tag` until `stop`, telling `answered` each outcome;
/// pauses `pause` after each call (and 20 ms after a failure).
pub async fn reserve_until(
    stop: &AtomicBool,
    store: &dyn SegmentStore,
    tag: &Tag,
    pause: Duration,
    mut answered: impl FnMut(Answer),
) {
    while !stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        match store.reserve(tag, None).await {
            Ok(range) => answered(Answer::Reserved(
                (range.first, range.last),
                Call::answered_now(began),
            )),
            Err(e) => {
                answered(Answer::Failed("reserve", kind_of_segment_error(&e)));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        tokio::time::sleep(pause).await;
    }
}

/// Acquires a worker ID of `0..=max` in `namespace` with a fresh token and
/// releases it, until `stop`, telling `answered` each outcome.
pub async fn churn_leases_until(
    stop: &AtomicBool,
    store: &dyn LeaseStore,
    namespace: &Namespace,
    (max, ttl): (u32, Duration),
    pause: Duration,
    mut answered: impl FnMut(Answer),
) {
    while !stop.load(Ordering::Relaxed) {
        let token = Token::generate();
        let began = Instant::now();
        match store
            .acquire(namespace, max, &token, ttl, &Holder::default())
            .await
        {
            Ok(grant) => {
                answered(Answer::Granted(
                    (grant.id.get(), grant.fence),
                    Call::answered_now(began),
                ));
                if let Err(e) = store.release(namespace, grant.id, &token, 1).await {
                    answered(Answer::Failed("release", kind_of_lease_error(&e)));
                }
            }
            Err(e) => {
                answered(Answer::Failed("acquire", kind_of_lease_error(&e)));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_writes_are_counted() {
        let acknowledged = Acknowledged {
            ranges: vec![(1, 10), (11, 20), (15, 24), (21, 30)],
            grants: vec![(0, 1), (1, 1), (0, 2), (0, 2), (1, 1)],
        };
        // 15..=20 twice, 21..=24 twice.
        assert_eq!(acknowledged.repeated_segment_ids(), 10);
        assert_eq!(acknowledged.fences_gone_back(), 2);
        assert_eq!(Acknowledged::default().repeated_segment_ids(), 0);
    }
}
