//! Key names and value encodings.
//!
//! A namespace lives under `<prefix>/ns/<namespace>/`:
//!
//! | key | value | lease | meaning |
//! | --- | --- | --- | --- |
//! | `config` | `max_worker_id` | none | the pool size the namespace was first used with |
//! | `owner/<id>` | token | the holder's | the ID is live; deleted by etcd at expiry |
//! | `grant/<id>` | `<token> <holder>` | none | the last grant; written by grants only, so its mod revision is that grant's fence |
//! | `ownership/<id>` | `held <ttl secs>` or `forced <etcd lease>`; deleted by a release | none | the last grant's ttl, and whether it was released (deleted by its holder, `forced` by an operator, with the holder's etcd lease the force release revokes) |
//! | `mark/<id>` | watermark, 20 digits | none | the highest watermark ever stored |
//! | `token/<token>` | the ID, 7 digits | the holder's | the ID a token was granted, so an acquire sent again after its answer was lost finds its grant; gone with the lease |
//!
//! IDs are written with 7 digits so that keys sort by ID; watermarks with 20
//! so that etcd's byte-wise value comparison is numeric comparison. The fence
//! of a grant is the revision of the transaction that made it: etcd's
//! revision only rises, across restarts too.
//!
//! `owner/` and `ownership/` sort next to each other (no other kind sorts
//! between them), so one range read or one watch covers both: that is how a
//! process tells an ID that expired (its holder may still believe in it for
//! up to one ttl, see [`crate::mirror`]) from one that was released. A
//! release *deletes* `ownership/<id>` in the transaction that deletes the
//! owner, so a watch of deletions alone sees both (grants, all puts, then
//! cost the watch nothing).
//!
//! Segment counters live under `<prefix>/seg/<tag>` as `<max_id> <step> <nonce>`.

use workerid_core::{Error, Holder, Namespace, Result, Token, WorkerId};
use workerid_segment::Tag;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "workerid";

/// Checks a key prefix: 1 to 64 bytes of `[A-Za-z0-9._:-]`, optionally with
/// `/` between non-empty parts.
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    let ok = (1..=64).contains(&prefix.len())
        && prefix.split('/').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
        });
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "key prefix {prefix:?} must be 1 to 64 bytes of [A-Za-z0-9._:-] parts separated by '/'"
        )))
    }
}

/// The keys of one namespace.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    base: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, namespace: &Namespace) -> Keys {
        Keys {
            base: format!("{prefix}/ns/{namespace}/"),
        }
    }

    /// The prefix of every key of the namespace.
    pub(crate) fn namespace(&self) -> &str {
        &self.base
    }

    pub(crate) fn config(&self) -> String {
        format!("{}config", self.base)
    }

    pub(crate) fn owners(&self) -> String {
        self.all("owner")
    }

    pub(crate) fn owner(&self, id: u32) -> String {
        format!("{}owner/{id:07}", self.base)
    }

    pub(crate) fn grant(&self, id: u32) -> String {
        format!("{}grant/{id:07}", self.base)
    }

    pub(crate) fn ownership(&self, id: u32) -> String {
        format!("{}ownership/{id:07}", self.base)
    }

    /// The range `[start, end)` of every `owner/` and `ownership/` key.
    pub(crate) fn owners_and_ownership(&self) -> (String, Vec<u8>) {
        let mut end = self.all("ownership").into_bytes();
        // The prefix ends in '/': the next byte value ends the range.
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        (self.owners(), end)
    }

    /// The prefix of every `<kind>/` key: `owner`, `grant`, `mark`, `ownership`.
    pub(crate) fn all(&self, kind: &str) -> String {
        format!("{}{kind}/", self.base)
    }

    /// The ID a `<kind>/<id>` key names.
    pub(crate) fn id_of(&self, kind: &str, key: &[u8]) -> Option<u32> {
        let key = std::str::from_utf8(key).ok()?;
        key.strip_prefix(&self.all(kind))?.parse().ok()
    }

    /// The key that names the ID `token` was granted.
    pub(crate) fn token(&self, token: &Token) -> String {
        format!("{}token/{token}", self.base)
    }

    pub(crate) fn mark(&self, id: u32) -> String {
        format!("{}mark/{id:07}", self.base)
    }

    /// The ID an `owner/<id>` key names.
    pub(crate) fn owner_id(&self, key: &[u8]) -> Option<u32> {
        self.id_of("owner", key)
    }
}

/// The key of a segment tag.
pub(crate) fn segment(prefix: &str, tag: &Tag) -> String {
    format!("{prefix}/seg/{tag}")
}

/// The prefix of every segment tag.
pub(crate) fn segments(prefix: &str) -> String {
    format!("{prefix}/seg/")
}

pub(crate) fn watermark(value: u64) -> String {
    format!("{value:020}")
}

/// The value of `grant/<id>`: the token and the holder label of a grant.
pub(crate) fn grant_value(token: &Token, holder: &Holder) -> String {
    format!("{token} {holder}")
}

/// The token part of a `grant/<id>` value (neither part has a space).
pub(crate) fn grant_token(value: &[u8]) -> &[u8] {
    value.split(|&b| b == b' ').next().unwrap_or(value)
}

/// The holder part of a `grant/<id>` value.
pub(crate) fn grant_holder(value: &[u8]) -> Option<Holder> {
    let (_, holder) = std::str::from_utf8(value).ok()?.split_once(' ')?;
    Holder::new(holder).ok()
}

/// What `ownership/<id>` says about the last grant of an ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// Granted, or last moved to a new etcd lease, for `ttl_secs`; not released.
    Held { ttl_secs: u32 },
    /// Released by an operator, from the holder whose `owner/` key rides on
    /// etcd lease `lease`: the force release then revokes that lease, which
    /// deletes the key, and the holder's next keep-alive fails.
    Forced { lease: i64 },
}

impl Ownership {
    pub(crate) fn held(ttl_secs: i64) -> Ownership {
        Ownership::Held {
            ttl_secs: u32::try_from(ttl_secs).unwrap_or(u32::MAX),
        }
    }

    pub(crate) fn encode(&self) -> String {
        match self {
            Ownership::Held { ttl_secs } => format!("held {ttl_secs}"),
            Ownership::Forced { lease } => format!("forced {lease}"),
        }
    }

    pub(crate) fn parse(bytes: &[u8]) -> Option<Ownership> {
        let text = std::str::from_utf8(bytes).ok()?;
        if let Some(lease) = text.strip_prefix("forced ") {
            return Some(Ownership::Forced {
                lease: lease.parse().ok()?,
            });
        }
        let ttl_secs = text.strip_prefix("held ")?.parse().ok()?;
        Some(Ownership::Held { ttl_secs })
    }

    /// Whether the last grant, if any, ended by a release (its holder's or
    /// an operator's), from the value of `ownership/<id>`: a release deletes
    /// the key, so no value means released (or never granted).
    pub(crate) fn released(bytes: Option<&[u8]>) -> bool {
        !matches!(
            bytes.map(Ownership::parse),
            Some(Some(Ownership::Held { .. }) | None)
        )
    }
}

/// Parses a decimal number stored by this crate.
pub(crate) fn number<T: std::str::FromStr>(bytes: &[u8]) -> Option<T> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// The contract's error for a renew or release by `token` that found no live
/// `owner/<id>` held by it, from what the keys of the ID say: the live owner's
/// token (if any), the last grant (`grant/<id>`), and whether that grant was
/// released (see [`Ownership::released`]).
pub(crate) fn refusal(
    owner: Option<&[u8]>,
    grant: Option<&[u8]>,
    released: bool,
    token: &Token,
    id: WorkerId,
) -> Error {
    let mine = token.to_string();
    match (owner, grant.map(grant_token)) {
        (Some(_), _) => Error::TokenMismatch { id },
        (None, None) => Error::NotAssigned { id },
        (None, Some(_)) if released => Error::NotAssigned { id },
        (None, Some(last)) if last == mine.as_bytes() => Error::TokenExpired { id },
        (None, Some(_)) => Error::TokenMismatch { id },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_watermarks_sort_as_numbers() {
        let keys = Keys::new("p", &Namespace::new("ns").unwrap());
        assert!(keys.owner(9) < keys.owner(10));
        assert!(keys.owner(4_194_303).len() == keys.owner(0).len());
        assert!(watermark(9) < watermark(10));
        assert!(watermark(u64::MAX - 1) < watermark(u64::MAX));
        assert_eq!(keys.owner_id(keys.owner(42).as_bytes()), Some(42));
        assert_eq!(keys.owner_id(b"p/ns/other/owner/0000001"), None);
    }

    #[test]
    fn owners_and_ownership_are_one_range() {
        let keys = Keys::new("p", &Namespace::new("ns").unwrap());
        let (start, end) = keys.owners_and_ownership();
        let inside = |key: String| key.as_str() >= start.as_str() && key.as_bytes() < &end[..];
        assert!(inside(keys.owner(0)) && inside(keys.owner(4_194_303)));
        assert!(inside(keys.ownership(0)) && inside(keys.ownership(4_194_303)));
        for other in [keys.grant(1), keys.mark(1), keys.config()] {
            assert!(!inside(other.clone()), "{other}");
        }
    }

    #[test]
    fn ownership_values_round_trip() {
        for o in [
            Ownership::Held { ttl_secs: 10 },
            Ownership::Forced {
                lease: 0x7a1b_2c3d_4e5f_6071,
            },
        ] {
            assert_eq!(Ownership::parse(o.encode().as_bytes()), Some(o));
        }
        assert_eq!(Ownership::parse(b"held x"), None);
        assert_eq!(Ownership::parse(b"forced"), None);
        assert_eq!(Ownership::parse(b"forced 12x"), None);
        assert!(Ownership::released(Some(b"forced 42")));
        assert!(!Ownership::released(Some(b"held 3")));
        assert!(!Ownership::released(Some(b"nonsense")));
        assert!(Ownership::released(None));
    }

    #[test]
    fn namespaces_do_not_share_keys() {
        let a = Keys::new("p", &Namespace::new("a").unwrap());
        let ab = Keys::new("p", &Namespace::new("a.b").unwrap());
        assert!(!ab.owner(1).starts_with(&a.owners()));
    }

    #[test]
    fn prefixes_are_checked() {
        for good in ["workerid", "app/ids", "a.b:c-d_e"] {
            assert!(check_prefix(good).is_ok(), "{good:?}");
        }
        for bad in ["", "/a", "a/", "a//b", "has space", &"p".repeat(65)] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn grant_values_round_trip() {
        let token = Token::generate();
        let holder = Holder::new("prod/orders-1:7").unwrap();
        let value = grant_value(&token, &holder);
        assert_eq!(grant_token(value.as_bytes()), token.to_string().as_bytes());
        assert_eq!(grant_holder(value.as_bytes()), Some(holder));
        assert_eq!(grant_holder(b"no-holder"), None);
    }

    #[test]
    fn refusals_follow_the_contract() {
        let mine = Token::generate();
        let other = Token::generate();
        let holder = Holder::new("h:1").unwrap();
        let (m, o) = (grant_value(&mine, &holder), grant_value(&other, &holder));
        let id = WorkerId::from(3);
        let is = |e: Error| format!("{e:?}");
        let cases = [
            (None, Some(m.as_bytes()), false, Error::TokenExpired { id }),
            (
                Some(o.as_bytes()),
                Some(o.as_bytes()),
                false,
                Error::TokenMismatch { id },
            ),
            (None, Some(m.as_bytes()), true, Error::NotAssigned { id }),
            (None, None, false, Error::NotAssigned { id }),
            (None, Some(o.as_bytes()), false, Error::TokenMismatch { id }),
            (None, Some(o.as_bytes()), true, Error::NotAssigned { id }),
        ];
        for (owner, grant, released, expected) in cases {
            assert_eq!(
                is(refusal(owner, grant, released, &mine, id)),
                is(expected),
                "{owner:?} {grant:?} {released}"
            );
        }
    }
}
