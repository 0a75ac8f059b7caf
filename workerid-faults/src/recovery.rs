//! What a recovery after a fault must do, for library clients and service
//! servers alike: issue again within a bound, judged only when the next
//! fault left it the time to.

use std::time::Duration;

/// How soon after a heal every client (every server) must issue again: the
/// lease's ttl, after which a lost lease can be taken again, plus 2 s for
/// the requests that find the store reachable again.
///
/// ```
/// use std::time::Duration;
/// use workerid_faults::recovery;
///
/// assert_eq!(recovery::bound(Duration::from_secs(2)), Duration::from_secs(4));
/// ```
pub fn bound(ttl: Duration) -> Duration {
    ttl + Duration::from_secs(2)
}

/// Whether a recovery is judged against `bound`: the client issued again
/// `after` the heal before the next fault began (`next` after the heal,
/// `None` when no fault followed), or the next fault left it at least the
/// bound. A recovery the next fault cut short says nothing about the heal.
///
/// ```
/// use std::time::Duration;
/// use workerid_faults::recovery;
///
/// let s = Duration::from_secs;
/// assert!(recovery::judged(Some(s(1)), Some(s(2)), s(4)));
/// assert!(!recovery::judged(Some(s(3)), Some(s(2)), s(4)));
/// assert!(recovery::judged(None, Some(s(5)), s(4)));
/// ```
pub fn judged(after: Option<Duration>, next: Option<Duration>, bound: Duration) -> bool {
    next.is_none_or(|next| next >= bound || after.is_some_and(|after| after <= next))
}
