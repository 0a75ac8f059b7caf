//! `Debug` for the messages that carry a secret: a lease's token proves
//! the lease is the caller's, and a range's receipt lets its holder give the
//! range back, so neither is shown in full.

use std::fmt;

use crate::v1::{AcquireRequest, ReleaseRequest, RenewRequest, SegmentRange};

/// A token as `Debug` shows it: its first 4 characters, as the core's
/// `Token` shows them, which identify it in a log but cannot stand for it.
struct Token<'a>(&'a str);

impl fmt::Debug for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.chars().nth(4).is_none() {
            // Four characters or fewer would be shown whole: show none.
            return f.write_str("\"…\"");
        }
        let shown: String = self.0.chars().take(4).collect();
        write!(f, "\"{shown}…\"")
    }
}

/// A receipt as `Debug` shows it: its length only.
struct Receipt(usize);

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0)
    }
}

impl fmt::Debug for AcquireRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireRequest")
            .field("namespace", &self.namespace)
            .field("max_worker_id", &self.max_worker_id)
            .field("token", &Token(&self.token))
            .field("ttl_ms", &self.ttl_ms)
            .field("holder", &self.holder)
            .finish()
    }
}

impl fmt::Debug for RenewRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RenewRequest")
            .field("namespace", &self.namespace)
            .field("worker_id", &self.worker_id)
            .field("token", &Token(&self.token))
            .field("ttl_ms", &self.ttl_ms)
            .field("watermark", &self.watermark)
            .finish()
    }
}

impl fmt::Debug for ReleaseRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReleaseRequest")
            .field("namespace", &self.namespace)
            .field("worker_id", &self.worker_id)
            .field("token", &Token(&self.token))
            .field("watermark", &self.watermark)
            .finish()
    }
}

impl fmt::Debug for SegmentRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentRange")
            .field("first", &self.first)
            .field("last", &self.last)
            .field("version", &self.version)
            .field("floor", &self.floor)
            .field("receipt", &Receipt(self.receipt.len()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{GiveBackRequest, ReserveRequest};

    const TOKEN: &str = "AbCdEfGhIjKlMnOpQrStUv";

    #[test]
    fn a_token_shows_its_first_four_characters_only() {
        let shown = [
            format!(
                "{:?}",
                AcquireRequest {
                    token: TOKEN.into(),
                    ..AcquireRequest::default()
                }
            ),
            format!(
                "{:?}",
                RenewRequest {
                    token: TOKEN.into(),
                    ..RenewRequest::default()
                }
            ),
            format!(
                "{:?}",
                ReleaseRequest {
                    token: TOKEN.into(),
                    ..ReleaseRequest::default()
                }
            ),
        ];
        for shown in shown {
            assert!(shown.contains("token: \"AbCd…\""), "{shown}");
            assert!(!shown.contains("AbCdE"), "{shown}");
        }
    }

    #[test]
    fn a_short_token_shows_nothing_and_a_wide_one_four_characters() {
        for (token, expected) in [("", "\"…\""), ("abcd", "\"…\""), ("éèêëxyz", "\"éèêë…\"")]
        {
            assert_eq!(format!("{:?}", Token(token)), expected);
        }
    }

    #[test]
    fn a_receipt_shows_its_length_only_wherever_the_range_goes() {
        let range = SegmentRange {
            first: 1,
            last: 10,
            version: 3,
            floor: 1,
            receipt: b"secret-signature-bytes".to_vec(),
        };
        let shown = [
            format!("{range:?}"),
            format!(
                "{:?}",
                GiveBackRequest {
                    tag: "orders".into(),
                    reserved: Some(range.clone()),
                    new_max: 5,
                }
            ),
            format!(
                "{:?}",
                ReserveRequest {
                    previous: Some(range.clone()),
                    ..ReserveRequest::default()
                }
            ),
        ];
        for shown in shown {
            assert!(shown.contains("receipt: <22 bytes>"), "{shown}");
            assert!(!shown.contains("secret"), "{shown}");
            assert!(!shown.contains("115, 101"), "{shown}");
        }
    }
}
