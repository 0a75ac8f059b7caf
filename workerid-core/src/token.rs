//! Lease tokens: 16 random bytes, written as 22 URL-safe base64 characters.

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;

use crate::{Error, Result};

/// The length of a token's text form.
pub const TOKEN_LEN: usize = 22;

/// The secret that proves who holds a lease.
///
/// 16 bytes from a CSPRNG, written as 22 characters of
/// URL-safe base64 without padding (libx.net/workerid's format). Tokens are made by
/// [`Token::generate`] in the core, never by a store. Parsing is strict: only
/// the canonical 22-character form of 16 bytes is accepted, so text and bytes
/// correspond one to one.
///
/// `Debug` shows only the first four characters, so tokens do not leak into logs.
///
/// ```
/// use workerid_core::Token;
/// let token = Token::generate();
/// let text = token.to_string();
/// assert_eq!(text.len(), 22);
/// assert_eq!(text.parse::<Token>().unwrap(), token);
/// assert!("not-a-token".parse::<Token>().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token([u8; 16]);

impl Token {
    /// A fresh token from a CSPRNG (`rand`'s thread-local ChaCha generator,
    /// seeded and periodically reseeded from the operating system).
    pub fn generate() -> Self {
        let mut bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut bytes);
        Token(bytes)
    }

    /// A token with these bytes (for stores that keep tokens as bytes).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Token(bytes)
    }

    /// The 16 bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Parses the 22-character text form.
    ///
    /// # Errors
    /// [`Error::InvalidToken`] when `text` is not 22 URL-safe base64 characters
    /// that canonically encode 16 bytes.
    pub fn parse(text: &str) -> Result<Self> {
        if text.len() != TOKEN_LEN {
            return Err(Error::InvalidToken {
                reason: "a token is exactly 22 characters",
            });
        }
        let mut bytes = [0u8; 16];
        match URL_SAFE_NO_PAD.decode_slice(text, &mut bytes) {
            Ok(16) => Ok(Token(bytes)),
            _ => Err(Error::InvalidToken {
                reason: "a token is URL-safe base64 (A-Z a-z 0-9 - _) of 16 bytes",
            }),
        }
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; TOKEN_LEN];
        let n = URL_SAFE_NO_PAD
            .encode_slice(self.0, &mut buf)
            .map_err(|_| fmt::Error)?;
        f.write_str(std::str::from_utf8(&buf[..n]).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.to_string();
        write!(f, "Token({}…)", &text[..4])
    }
}

impl FromStr for Token {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Token::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_is_22_url_safe_chars_and_round_trips() {
        for _ in 0..1000 {
            let token = Token::generate();
            let text = token.to_string();
            assert_eq!(text.len(), TOKEN_LEN);
            assert!(text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
            assert_eq!(Token::parse(&text).unwrap(), token);
        }
    }

    #[test]
    fn tokens_differ() {
        let a = Token::generate();
        let b = Token::generate();
        assert_ne!(a, b);
    }

    #[test]
    fn rejects_malformed_text() {
        let good = Token::generate().to_string();
        const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        // The last character carries 2 unused bits, zero in the canonical form:
        // setting one gives the same 16 bytes in a second spelling.
        let last = ALPHABET.find(good.chars().last().unwrap()).unwrap();
        let non_canonical = format!("{}{}", &good[..21], &ALPHABET[last + 1..last + 2]);
        let cases = [
            String::new(),
            good[..21].to_string(),
            format!("{good}A"),
            format!("{}+", &good[..21]),
            format!("{}/", &good[..21]),
            format!("{}=", &good[..21]),
            format!("{} ", &good[..21]),
            "ééééééééééé".to_string(),
            non_canonical,
        ];
        for bad in cases.iter() {
            assert!(
                matches!(Token::parse(bad), Err(Error::InvalidToken { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn debug_does_not_leak_the_token() {
        let token = Token::generate();
        let debug = format!("{token:?}");
        assert!(!debug.contains(&token.to_string()));
    }
}
