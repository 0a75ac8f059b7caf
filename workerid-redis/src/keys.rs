//! Key names. Every key of a namespace carries the hash tag `{namespace}`, so
//! one script touches one slot and the store works on a Redis Cluster.

use workerid_core::{Error, Namespace, Result};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "workerid";

/// Checks a key prefix: 1 to 64 bytes of `[A-Za-z0-9._:-]` (no braces, which
/// would change the hash tag).
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    let ok = (1..=64).contains(&prefix.len())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "key prefix {prefix:?} must be 1 to 64 bytes of [A-Za-z0-9._:-]"
        )))
    }
}

/// The two keys of a namespace, in the order the scripts take them: the
/// hash of its IDs' state, and the sorted set of IDs by the instant each is
/// free.
pub(crate) fn keys(prefix: &str, namespace: &Namespace) -> [String; 2] {
    [
        format!("{prefix}:{{{namespace}}}"),
        format!("{prefix}:{{{namespace}}}:free"),
    ]
}

/// The set of every namespace this prefix has: each process adds a
/// namespace before its first acquire in it. Outside every namespace's hash
/// tag, so on a cluster it lives in a slot of its own.
pub(crate) fn registry(prefix: &str) -> String {
    format!("{prefix}:namespaces")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_namespace_hash_tag() {
        for key in keys("workerid", &Namespace::new("orders").unwrap()) {
            assert!(key.starts_with("workerid:{orders}"), "{key}");
        }
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(check_prefix("app.ids:v1").is_ok());
        for bad in ["", "a{b", "a}b", "has space", &"p".repeat(65)] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
    }
}
