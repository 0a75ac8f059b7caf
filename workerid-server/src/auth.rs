//! Bearer tokens: which ones a request may carry, and the check of one
//! in constant time.

use serde::Deserialize;

/// The tokens a setting accepts: none (no check), or any of several, so
/// that a token is rotated without a moment when servers and clients
/// disagree (add the new one everywhere, move the clients, drop the old).
/// Its `Debug` shows how many there are, never one of them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct BearerTokens(Vec<String>);

impl BearerTokens {
    /// These tokens (none: no check).
    pub fn new(tokens: Vec<String>) -> Self {
        BearerTokens(tokens)
    }

    /// Whether any token is set, so that requests must carry one.
    pub fn is_required(&self) -> bool {
        !self.0.is_empty()
    }

    /// The tokens, to check each one's text.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// Whether an `Authorization` header value carries one of the tokens.
    /// Every token is compared, whichever matches, so that the answer's
    /// timing tells nothing of which one came close.
    pub fn accept(&self, header: Option<&[u8]>) -> bool {
        self.0
            .iter()
            .fold(false, |any, token| any | authorized(token, header))
    }
}

impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|_| "***"))
            .finish()
    }
}

/// A setting of one token (`"t"`) or several (`["t1", "t2"]`).
impl<'de> Deserialize<'de> for BearerTokens {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OneOrMany;
        impl<'de> serde::de::Visitor<'de> for OneOrMany {
            type Value = BearerTokens;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string, or a list of strings")
            }
            fn visit_str<E: serde::de::Error>(self, token: &str) -> Result<BearerTokens, E> {
                Ok(BearerTokens(vec![token.to_owned()]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<BearerTokens, A::Error> {
                let mut tokens = Vec::new();
                while let Some(token) = seq.next_element::<String>()? {
                    tokens.push(token);
                }
                Ok(BearerTokens(tokens))
            }
        }
        deserializer.deserialize_any(OneOrMany)
    }
}

/// Whether an `Authorization` header value carries `token` as a bearer
/// token; compared in constant time, so the answer's timing does not tell
/// how much of a guess was right.
pub fn authorized(token: &str, header: Option<&[u8]>) -> bool {
    // The scheme's name is case-insensitive (RFC 9110, 11.1).
    let Some(given) = header
        .and_then(|h| h.split_at_checked(7))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"bearer "))
        .map(|(_, given)| given)
    else {
        return false;
    };
    let expected = token.as_bytes();
    let mut diff = u8::from(given.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        diff |= e ^ given.get(i).copied().unwrap_or(0);
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::{authorized, BearerTokens};

    #[test]
    fn bearer_tokens_are_checked() {
        for right in [&b"Bearer s3cret"[..], b"bearer s3cret", b"BEARER s3cret"] {
            assert!(authorized("s3cret", Some(right)));
        }
        for wrong in [
            &b"Bearer s3cre"[..],
            b"Bearer s3cret!",
            b"Bearer S3cret",
            b"Basic s3cret",
            b"s3cret",
            b"Bearer ",
            b"Bearer",
        ] {
            assert!(!authorized("s3cret", Some(wrong)));
        }
        assert!(!authorized("s3cret", None));
    }

    #[test]
    fn any_of_several_tokens_is_accepted() {
        let tokens = BearerTokens::new(vec!["new-t0ken".into(), "old-t0ken".into()]);
        assert!(tokens.is_required());
        assert!(tokens.accept(Some(b"Bearer new-t0ken")));
        assert!(tokens.accept(Some(b"Bearer old-t0ken")));
        assert!(!tokens.accept(Some(b"Bearer other")));
        assert!(!tokens.accept(None));
        assert!(!BearerTokens::default().is_required());
        assert!(!BearerTokens::default().accept(Some(b"Bearer new-t0ken")));
        assert_eq!(format!("{tokens:?}"), r#"["***", "***"]"#);
    }

    #[test]
    fn a_setting_is_one_token_or_a_list() {
        #[derive(serde::Deserialize)]
        struct Setting {
            token: BearerTokens,
        }
        let one: Setting = toml::from_str("token = \"a\"").unwrap();
        assert_eq!(one.token, BearerTokens::new(vec!["a".into()]));
        let two: Setting = toml::from_str("token = [\"a\", \"b\"]").unwrap();
        assert_eq!(two.token, BearerTokens::new(vec!["a".into(), "b".into()]));
        let wrong = toml::from_str::<Setting>("token = 7").err().unwrap();
        assert!(
            wrong.to_string().contains("a string, or a list of strings"),
            "{wrong}"
        );
    }
}
