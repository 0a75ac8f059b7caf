//! Namespaces: independent pools of worker IDs.

use crate::{Error, Result};

/// The longest namespace, in bytes.
pub const MAX_NAMESPACE_LEN: usize = 128;

/// The name of an independent pool of worker IDs (libx.net/workerid calls it *cluster*).
///
/// Two namespaces never see each other's leases. A namespace is 1 to 128 bytes
/// of `[A-Za-z0-9._:-]`, so it is safe as a key part in every store (it cannot
/// contain a Redis hash-tag brace, a SQL quote or an etcd path separator).
///
/// ```
/// use workerid_core::Namespace;
/// let ns = Namespace::new("orders.prod:eu-1").unwrap();
/// assert_eq!(ns.as_str(), "orders.prod:eu-1");
/// assert!(Namespace::new("has space").is_err());
/// assert!(Namespace::new("").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    /// Validates `name`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `name` is empty, longer than 128 bytes, or
    /// has a character outside `[A-Za-z0-9._:-]`.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::invalid_config("namespace is empty"));
        }
        if name.len() > MAX_NAMESPACE_LEN {
            return Err(Error::invalid_config(format!(
                "namespace is {} bytes long; at most {MAX_NAMESPACE_LEN} are allowed",
                name.len()
            )));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(Error::invalid_config(format!(
                "namespace {name:?} has the character {bad:?}; only [A-Za-z0-9._:-] are allowed"
            )));
        }
        Ok(Namespace(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

crate::text::impls!(Namespace);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_allowed_alphabet() {
        for ok in ["a", "A-Z_0.9:x", &"n".repeat(MAX_NAMESPACE_LEN)] {
            assert_eq!(Namespace::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn rejects_everything_else() {
        let too_long = "n".repeat(MAX_NAMESPACE_LEN + 1);
        for bad in ["", " ", "a b", "a{b}", "a/b", "é", "a'b", "a\0", &too_long] {
            let err = Namespace::new(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidConfig { .. }), "{bad:?}: {err}");
        }
    }
}
