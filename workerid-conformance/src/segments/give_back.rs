//! The give-back scenarios: a tail goes back only while nothing was
//! reserved since, however the give-back is replayed.

use workerid_segment::SegmentStore;

use super::{fresh_tag, versions_never_repeat, SegmentFactory};
use crate::Outcome;

/// A store that declares [`give_back`](workerid_segment::SegmentCapabilities::give_back)
/// false refuses every give-back and changes nothing.
async fn give_back_refused_everywhere(store: &dyn SegmentStore) -> Outcome {
    let tag = fresh_tag();
    store.create_tag(&tag, 1, 100).await.expect("create");
    let a = store.reserve(&tag, None).await.expect("reserve");
    assert!(
        !store.give_back(&tag, a, 1).await.expect("give back"),
        "a store without give-backs refuses them"
    );
    let b = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(b.first, a.end(), "a refused give-back changes nothing");
    Outcome::Passed
}

/// A tail goes back only while nothing was reserved since.
pub async fn give_back_only_when_untouched(f: &dyn SegmentFactory) -> Outcome {
    let store = f.connect().await;
    if !store.segment_capabilities().give_back {
        return give_back_refused_everywhere(&*store).await;
    }
    let tag = fresh_tag();
    store.create_tag(&tag, 1, 100).await.expect("create");
    let a = store.reserve(&tag, None).await.expect("reserve");
    assert!(
        store.give_back(&tag, a, 41).await.expect("give back"),
        "nothing reserved since"
    );
    let b = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(b.first, 41, "the tail given back is handed out again");
    let c = store.reserve(&tag, None).await.expect("reserve");
    assert!(
        !store.give_back(&tag, b, 61).await.expect("give back"),
        "a range was reserved since"
    );
    let d = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(d.first, c.last + 1, "a refused give-back changes nothing");
    assert!(
        !store
            .give_back(&tag, d, d.end() + 1)
            .await
            .expect("give back"),
        "a give-back never raises the max"
    );
    let e = store.reserve(&tag, Some(1)).await.expect("reserve");
    assert_eq!(e.first, d.end(), "a refused raise changes nothing");
    versions_never_repeat(&[a, b, c, d, e]);
    Outcome::Passed
}

/// A give-back sent again after the tag was reserved from and given back to
/// the same `max_id` (ABA: a retry after a lost answer) is refused: stores
/// compare the version of the reservation, not the value.
pub async fn replayed_give_back_is_refused(f: &dyn SegmentFactory) -> Outcome {
    let store = f.connect().await;
    if !store.segment_capabilities().give_back {
        return give_back_refused_everywhere(&*store).await;
    }
    let tag = fresh_tag();
    store.create_tag(&tag, 1, 10).await.expect("create");
    let a = store.reserve(&tag, None).await.expect("reserve");
    assert!(
        store.give_back(&tag, a, 1).await.expect("give back"),
        "nothing reserved since the first range"
    );
    let b = store.reserve(&tag, Some(20)).await.expect("reserve");
    assert_eq!(
        (b.first, b.last),
        (1, 20),
        "the range given back comes again"
    );
    assert!(
        store.give_back(&tag, b, a.end()).await.expect("give back"),
        "nothing reserved since the second range"
    );
    assert!(
        !store
            .give_back(&tag, a, 1)
            .await
            .expect("replayed give back"),
        "the first give-back, replayed, must be refused: IDs {}..={} were handed out since",
        b.first,
        a.last
    );
    let c = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(
        c.first,
        a.last + 1,
        "the refused replay changed nothing: no ID is handed out twice"
    );
    // A give-back of nothing is taken, and moves the version on like any
    // other: a server confirms with it that a range is still the tag's
    // last, and that range must then be given back no more.
    assert!(
        store.give_back(&tag, c, c.end()).await.expect("give back"),
        "a give-back of nothing, while nothing was reserved since"
    );
    assert!(
        !store.give_back(&tag, c, c.first).await.expect("give back"),
        "a give-back of nothing moved the version on: the range must not be given back again"
    );
    let d = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(d.first, c.end(), "the refused give-back changed nothing");
    versions_never_repeat(&[a, b, c, d]);
    Outcome::Passed
}

/// A give-back sent again after a server that knows no version
/// (go-id-alloc, Leaf) reserved the IDs it gave back is refused: such a
/// server only raises `max_id`, back to the end of the range given back,
/// and leaves the version as it was, so the version a give-back compares
/// must have moved on with the give-back itself. Needs
/// [`SegmentFactory::reserve_without_version`]; skipped on a store no such
/// server can share.
pub async fn replayed_give_back_is_refused_after_a_versionless_reservation(
    f: &dyn SegmentFactory,
) -> Outcome {
    let store = f.connect().await;
    if !store.segment_capabilities().give_back {
        return give_back_refused_everywhere(&*store).await;
    }
    let tag = fresh_tag();
    store.create_tag(&tag, 1, 10).await.expect("create");
    let a = store.reserve(&tag, None).await.expect("reserve");
    assert!(
        store.give_back(&tag, a, a.first).await.expect("give back"),
        "nothing reserved since the range"
    );
    if !f.reserve_without_version(&tag, 10).await {
        return Outcome::Skipped(
            "no server that knows no version can share this store (reserve_without_version)".into(),
        );
    }
    // The other server now holds a's IDs, and max_id is a.end() again.
    assert!(
        !store
            .give_back(&tag, a, a.first)
            .await
            .expect("replayed give back"),
        "the give-back, replayed, must be refused: IDs {}..={} were handed out since, by a \
         server that knows no version",
        a.first,
        a.last
    );
    let b = store.reserve(&tag, None).await.expect("reserve");
    assert_eq!(
        b.first,
        a.end(),
        "the refused replay changed nothing: the other server's IDs are not handed out again"
    );
    Outcome::Passed
}
