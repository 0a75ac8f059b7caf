//! Receipts for reserved ranges: a give-back rolls a tag's counter back, so
//! a client that gave back a range it never reserved (another client's,
//! guessed from the tag's `max_id` and a version count) would have those
//! IDs handed out twice. Each range a `Reserve` answers is signed; a
//! give-back must bring the signature back.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use workerid::segment::{self, Tag};
use workerid_proto::v1::SegmentRange;

/// Whether `range` is one a store could have handed out: `floor <= first
/// <= last < MAX_SEGMENT_ID`, so that its end (`last + 1`) never
/// overflows.
pub fn well_formed(range: &SegmentRange) -> bool {
    range.floor <= range.first && range.first <= range.last && range.last < segment::MAX_SEGMENT_ID
}

/// `range` as the store's range (its bounds and version).
pub fn store_range(range: &SegmentRange) -> segment::Range {
    segment::Range {
        first: range.first,
        last: range.last,
        version: range.version,
    }
}

/// Signs and checks ranges with one key: the `give_back_key` the servers
/// of one store share, or one drawn at random when none is set (then only
/// the server that reserved a range takes it back).
#[derive(Clone)]
pub struct Receipts {
    key: Hmac<Sha256>,
}

impl std::fmt::Debug for Receipts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Receipts(***)")
    }
}

impl Receipts {
    /// Receipts under `key`, or under 32 random bytes without one.
    pub fn new(key: Option<&str>) -> Receipts {
        // HMAC's own key schedule (RFC 2104): a key longer than the hash's
        // block is hashed first, and the key is padded with zeros to a
        // block.
        let mut block = hmac::digest::Key::<Hmac<Sha256>>::default();
        match key {
            Some(key) if key.len() > block.len() => {
                let hashed = Sha256::digest(key.as_bytes());
                block[..hashed.len()].copy_from_slice(&hashed);
            }
            Some(key) => block[..key.len()].copy_from_slice(key.as_bytes()),
            None => rand::fill(&mut block[..32]),
        }
        Receipts {
            key: Hmac::new(&block),
        }
    }

    /// `range` with its receipt: the signature of the tag, the bounds, the
    /// version and the floor.
    pub fn sign(&self, tag: &Tag, mut range: SegmentRange) -> SegmentRange {
        range.receipt = self.mac(tag, &range).finalize().into_bytes().to_vec();
        range
    }

    /// Whether `range` carries the receipt this key gave it for `tag`
    /// (compared in constant time).
    pub fn verify(&self, tag: &Tag, range: &SegmentRange) -> bool {
        self.mac(tag, range).verify_slice(&range.receipt).is_ok()
    }

    /// `range` as the store's range, when it is well formed and carries
    /// its receipt for `tag`.
    pub fn verified(&self, tag: &Tag, range: &SegmentRange) -> Option<segment::Range> {
        (well_formed(range) && self.verify(tag, range)).then(|| store_range(range))
    }

    fn mac(&self, tag: &Tag, range: &SegmentRange) -> Hmac<Sha256> {
        let mut mac = self.key.clone();
        mac.update(b"workerid.v1 give-back\0");
        mac.update(&(tag.as_str().len() as u64).to_be_bytes());
        mac.update(tag.as_str().as_bytes());
        for field in [range.first, range.last, range.version, range.floor] {
            mac.update(&field.to_be_bytes());
        }
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: u64, last: u64, version: u64, floor: u64) -> SegmentRange {
        SegmentRange {
            first,
            last,
            version,
            floor,
            receipt: Vec::new(),
        }
    }

    #[test]
    fn a_receipt_holds_for_its_range_and_tag_only() {
        let receipts = Receipts::new(Some("fleet-secret"));
        let tag = Tag::new("orders").unwrap();
        let signed = receipts.sign(&tag, range(100, 199, 7, 100));
        assert_eq!(signed.receipt.len(), 32);
        assert!(receipts.verify(&tag, &signed));
        assert!(Receipts::new(Some("fleet-secret")).verify(&tag, &signed));

        let altered: [fn(&mut SegmentRange); 5] = [
            |r| r.first = 99,
            |r| r.last = 200,
            |r| r.version = 8,
            |r| r.floor = 0,
            |r| r.receipt[0] ^= 1,
        ];
        for alter in altered {
            let mut forged = signed.clone();
            alter(&mut forged);
            assert!(!receipts.verify(&tag, &forged), "{forged:?}");
        }
        assert!(!receipts.verify(&Tag::new("orders2").unwrap(), &signed));
        assert!(!Receipts::new(Some("other")).verify(&tag, &signed));
        assert!(!Receipts::new(None).verify(&tag, &signed));
        let unsigned = range(100, 199, 7, 100);
        assert!(!receipts.verify(&tag, &unsigned));
        assert_eq!(format!("{receipts:?}"), "Receipts(***)");
    }

    /// The key is scheduled as HMAC schedules any key, long or short.
    #[test]
    fn keys_of_any_length_sign_as_hmac_does() {
        let tag = Tag::new("orders").unwrap();
        for key in [
            "k".repeat(16),
            "k".repeat(64),
            "k".repeat(65),
            "k".repeat(300),
        ] {
            let signed = Receipts::new(Some(&key)).sign(&tag, range(1, 10, 1, 1));
            let mut expected = <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes()).unwrap();
            expected.update(b"workerid.v1 give-back\0");
            expected.update(&6u64.to_be_bytes());
            expected.update(b"orders");
            for field in [1u64, 10, 1, 1] {
                expected.update(&field.to_be_bytes());
            }
            expected.verify_slice(&signed.receipt).unwrap();
        }
    }
}
