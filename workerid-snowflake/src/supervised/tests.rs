use super::*;

fn idle() -> SupervisedWorker {
    let (stop, _) = watch::channel(false);
    let (_, done) = watch::channel(false);
    SupervisedWorker {
        shared: Arc::new(Shared::new()),
        stop,
        done,
    }
}

#[test]
fn jitter_stays_within_the_upper_half_of_the_base() {
    for _ in 0..1000 {
        let d = jittered(Duration::from_secs(1));
        assert!(d >= Duration::from_millis(500) && d <= Duration::from_secs(1));
    }
    assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
}

#[test]
fn no_worker_is_not_ready_in_fixed_words() {
    let s = idle();
    assert_eq!(
        s.status(),
        Err(NextIdError::NotReady { reason: JOINING[0] })
    );
    assert_eq!(
        s.next_id(),
        Err(NextIdError::NotReady { reason: JOINING[0] })
    );
    assert!(s.worker().is_none());
    assert_eq!(s.counts(), SupervisorCounts::default());
}

#[test]
fn a_failed_join_says_why_without_the_store_message() {
    let s = idle();
    let full = Error::Lease(workerid_core::Error::NoAvailableId { max_worker_id: 0 });
    s.shared.joined(Err(&full));
    assert_eq!(
        s.status(),
        Err(NextIdError::NotReady { reason: JOINING[1] })
    );
    let down = Error::Lease(workerid_core::Error::unavailable(
        "redis",
        "10.0.0.5:6379 refused",
    ));
    s.shared.joined(Err(&down));
    assert_eq!(
        s.next_id(),
        Err(NextIdError::NotReady { reason: JOINING[2] })
    );
    assert!(!s.next_id().unwrap_err().to_string().contains("10.0.0.5"));
    let behind = Error::ClockDriftTooLarge {
        drift: Duration::from_secs(3_600),
    };
    s.shared.joined(Err(&behind));
    assert_eq!(
        s.status(),
        Err(NextIdError::NotReady { reason: JOINING[3] })
    );
    let mismatch = Error::Lease(workerid_core::Error::ConfigMismatch {
        namespace: "orders".into(),
        stored: 3,
        requested: 1023,
    });
    s.shared.joined(Err(&mismatch));
    assert_eq!(
        s.status(),
        Err(NextIdError::NotReady { reason: JOINING[4] })
    );
    s.shared.joined(Ok(()));
    assert_eq!(
        s.status(),
        Err(NextIdError::NotReady { reason: JOINING[0] })
    );
}
