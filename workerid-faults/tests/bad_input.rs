//! Bad input: random strings, IDs, tokens and configurations give typed
//! errors, never a panic, and never change the store.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use workerid::compat::LibxCompat;
use workerid::memory::MemoryStore;
use workerid::{Allocator, Error, LeaseOptions, LeaseStore, Listing, Namespace, Token, TOKEN_LEN};

const NAMESPACE: &str = "bad-input";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A listing without the time left of live leases (it moves on its own).
fn snapshot(listing: &Listing) -> Vec<(u32, &'static str, u64, u64)> {
    listing
        .leases
        .iter()
        .map(|l| (l.id.get(), l.state.name(), l.fence, l.watermark))
        .collect()
}

/// A store with a namespace of 16 IDs: 3 held live (long ttl), 1 released.
fn populated(rt: &tokio::runtime::Runtime) -> (Arc<dyn LeaseStore>, Allocator) {
    let store: Arc<dyn LeaseStore> = Arc::new(MemoryStore::new());
    let options = LeaseOptions::new()
        .worker_bits(4)
        .ttl(Duration::from_secs(600))
        .max_lease_time(Duration::from_secs(600));
    let allocator = Allocator::from_arc(store.clone(), NAMESPACE, options).unwrap();
    rt.block_on(async {
        for _ in 0..3 {
            allocator.acquire().await.unwrap();
        }
        let freed = allocator.acquire().await.unwrap();
        allocator
            .release_with_watermark(&freed, 1_234)
            .await
            .unwrap();
    });
    (store, allocator)
}

fn token_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[A-Za-z0-9_-]{22}",
        "[A-Za-z0-9_+/=-]{20,24}",
        any::<[u8; 16]>().prop_map(|b| Token::from_bytes(b).to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn tokens_parse_only_from_their_canonical_text(text in token_text()) {
        // 22 URL-safe base64 characters carry 132 bits: the last character
        // must leave the 4 bits beyond the 16 bytes at zero.
        let sextet = |c: u8| match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'-' => Some(62),
            b'_' => Some(63),
            _ => None,
        };
        let canonical = text.len() == TOKEN_LEN
            && text.bytes().all(|c| sextet(c).is_some())
            && text.bytes().last().and_then(sextet).is_some_and(|v| v & 0xF == 0);
        match Token::parse(&text) {
            Ok(token) => {
                prop_assert!(canonical, "{text:?} accepted");
                prop_assert_eq!(token.to_string(), text);
            }
            Err(Error::InvalidToken { .. }) => prop_assert!(!canonical, "{text:?} refused"),
            Err(other) => prop_assert!(false, "not InvalidToken: {other:?}"),
        }
    }

    #[test]
    fn namespaces_are_checked_byte_for_byte(
        name in prop_oneof![any::<String>(), "[A-Za-z0-9._:-]{0,140}", "[ -~]{1,10}"]
    ) {
        let valid = !name.is_empty()
            && name.len() <= 128
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b".:_-".contains(&b));
        match Namespace::new(name.clone()) {
            Ok(ns) => {
                prop_assert!(valid, "{name:?} accepted");
                prop_assert_eq!(ns.as_str(), name.as_str());
            }
            Err(Error::InvalidConfig { .. }) => prop_assert!(!valid, "{name:?} refused"),
            Err(other) => prop_assert!(false, "not InvalidConfig: {other:?}"),
        }
    }

    #[test]
    fn configs_are_accepted_exactly_when_valid(
        bits in any::<u8>(),
        max_id in prop_oneof![any::<u32>(), 0u32..5_000_000],
        by_bits in any::<bool>(),
        ttl_us in prop_oneof![Just(0u64), 0u64..2_000_000_000, any::<u64>().prop_map(|x| x % 10_000_000_000)],
        max_lease_ms in prop_oneof![Just(0u64), 0u64..1_000_000],
        timeout_ms in prop_oneof![Just(0u64), 1u64..100_000],
        ppm in prop_oneof![0u32..600_000, any::<u32>()],
        namespace in prop_oneof![Just("ok".to_string()), any::<String>()],
    ) {
        let rt = runtime();
        let (store, allocator) = populated(&rt);
        let before = rt.block_on(allocator.list()).unwrap();
        let ttl = Duration::from_micros(ttl_us);
        let max_lease = Duration::from_millis(max_lease_ms);
        let mut options = LeaseOptions::new()
            .ttl(ttl)
            .max_lease_time(max_lease)
            .request_timeout(Duration::from_millis(timeout_ms))
            .drift_allowance_ppm(ppm);
        options = if by_bits { options.worker_bits(bits) } else { options.max_worker_id(max_id) };
        let pool_ok = if by_bits { (1..=22).contains(&bits) } else { max_id < 1 << 22 };
        let valid = pool_ok
            && Namespace::new(namespace.clone()).is_ok()
            && !max_lease.is_zero()
            && timeout_ms > 0
            && ppm <= 500_000
            && !ttl.is_zero()
            && ttl <= max_lease
            && ttl_us % 1_000 == 0;
        match Allocator::from_arc(store.clone(), &namespace, options) {
            Ok(_) => prop_assert!(valid, "accepted an invalid configuration"),
            Err(Error::InvalidConfig { .. }) => prop_assert!(!valid, "refused a valid configuration"),
            Err(other) => prop_assert!(false, "not InvalidConfig: {other:?}"),
        }
        let after = rt.block_on(allocator.list()).unwrap();
        prop_assert_eq!(snapshot(&before), snapshot(&after));
    }

    #[test]
    fn random_ids_and_tokens_get_typed_errors_and_change_nothing(
        id in prop_oneof![0u64..20, any::<u64>()],
        token in token_text(),
        force_id in 16u64..,
    ) {
        let rt = runtime();
        let (_store, allocator) = populated(&rt);
        let before = rt.block_on(allocator.list()).unwrap();
        let renewed = rt.block_on(allocator.renew_id(id, &token));
        let released = rt.block_on(allocator.release_id(id, &token));
        let forced = rt.block_on(allocator.force_release(force_id));
        for outcome in [renewed, released] {
            match outcome {
                Err(Error::InvalidWorkerId { .. }) => prop_assert!(id > 15),
                Err(Error::InvalidToken { .. }) => prop_assert!(Token::parse(&token).is_err()),
                Err(Error::TokenMismatch { .. } | Error::NotAssigned { .. }) => {}
                other => prop_assert!(false, "id {id}, token {token:?}: {other:?}"),
            }
        }
        prop_assert!(matches!(forced, Err(Error::InvalidWorkerId { .. })), "{forced:?}");
        let after = rt.block_on(allocator.list()).unwrap();
        prop_assert_eq!(snapshot(&before), snapshot(&after));
    }
}
