//! Who holds a lease: a label stored with every grant, so an operator looking
//! at a stuck worker ID knows which host or pod to look at.

use crate::{Error, Result};

/// The longest holder label, in bytes.
pub const MAX_HOLDER_LEN: usize = 128;

/// The environment variable that overrides the default holder label
/// (for example a Kubernetes pod name: `WORKERID_HOLDER=$(POD_NAME)`).
pub const HOLDER_ENV: &str = "WORKERID_HOLDER";

/// The label of the process that holds a lease, stored with every grant and
/// shown by [`LeaseStore::list`](crate::LeaseStore::list).
///
/// A label is 1 to 128 bytes of `[A-Za-z0-9._:/-]`: enough for a host name
/// and process ID (`web-3:4242`), a pod (`prod/orders-7f9c-x2x`) or an IP
/// address with a port. It is stored in plain text and shown to operators,
/// so it must not be a secret; `@` is refused so that a URL with credentials
/// (`redis://user:pw@host`) cannot become a label by mistake.
///
/// ```
/// use workerid_core::Holder;
/// let pod = Holder::new("prod/orders-7f9c-x2x").unwrap();
/// assert_eq!(pod.as_str(), "prod/orders-7f9c-x2x");
/// assert!(Holder::new("redis://ops:pw@cache").is_err());
/// assert!(Holder::new("").is_err());
/// // The default: this host's name and the process ID.
/// assert!(Holder::default().as_str().ends_with(&format!(":{}", std::process::id())));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Holder(String);

impl Holder {
    /// Validates `label`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `label` is empty, longer than 128 bytes,
    /// or has a character outside `[A-Za-z0-9._:/-]`.
    pub fn new(label: impl Into<String>) -> Result<Self> {
        let label = label.into();
        if label.is_empty() {
            return Err(Error::invalid_config("holder label is empty"));
        }
        if label.len() > MAX_HOLDER_LEN {
            return Err(Error::invalid_config(format!(
                "holder label is {} bytes long; at most {MAX_HOLDER_LEN} are allowed",
                label.len()
            )));
        }
        if let Some(bad) = label.chars().find(|&c| !allowed(c)) {
            // The label is not echoed: a refused label may be a secret.
            return Err(Error::invalid_config(format!(
                "holder label has the character {bad:?}; only [A-Za-z0-9._:/-] are allowed"
            )));
        }
        Ok(Holder(label))
    }

    /// The label from [`HOLDER_ENV`] (`WORKERID_HOLDER`) when it is set,
    /// otherwise [`Holder::default`] (host name and process ID).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `WORKERID_HOLDER` is set but is not a
    /// valid label (see [`Holder::new`]); the message names the variable.
    pub fn from_env() -> Result<Self> {
        match std::env::var_os(HOLDER_ENV) {
            None => Ok(Holder::default()),
            Some(value) => {
                let value = value.into_string().map_err(|_| {
                    Error::invalid_config(format!("{HOLDER_ENV} is not valid UTF-8"))
                })?;
                Holder::new(value).map_err(|e| match e {
                    Error::InvalidConfig { reason } => {
                        Error::invalid_config(format!("{HOLDER_ENV}: {reason}"))
                    }
                    other => other,
                })
            }
        }
    }

    /// The label.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Holder {
    /// `<host name>:<process ID>`, the host name cut to fit and any character
    /// outside the allowed set replaced by `_`.
    fn default() -> Self {
        let pid = std::process::id().to_string();
        let room = MAX_HOLDER_LEN - pid.len() - 1;
        let mut host: String = host_name()
            .chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .take(room)
            .collect();
        if host.is_empty() {
            host.push_str("unknown");
        }
        Holder(format!("{host}:{pid}"))
    }
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-')
}

#[cfg(target_os = "linux")]
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(not(target_os = "linux"))]
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .or_else(|_| std::env::var("COMPUTERNAME"))
        .unwrap_or_default()
}

crate::text::impls!(Holder);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_checked() {
        for good in [
            "a",
            "web-3:4242",
            "prod/orders-7f9c",
            "10.0.0.7:8080",
            "x_y.z",
        ] {
            assert_eq!(Holder::new(good).unwrap().as_str(), good);
        }
        assert!(Holder::new("x".repeat(MAX_HOLDER_LEN)).is_ok());
        for bad in ["", "has space", "u:pw@host", "a{b}", "tab\t", "é"] {
            assert!(
                matches!(Holder::new(bad), Err(Error::InvalidConfig { .. })),
                "{bad:?}"
            );
        }
        assert!(Holder::new("x".repeat(MAX_HOLDER_LEN + 1)).is_err());
    }

    #[test]
    fn a_refused_label_is_not_echoed() {
        let err = Holder::new("redis://ops:secretpw@cache").unwrap_err();
        assert!(!err.to_string().contains("secretpw"), "{err}");
    }

    #[test]
    fn the_default_is_a_valid_label() {
        let holder = Holder::default();
        assert_eq!(Holder::new(holder.as_str()).unwrap(), holder);
        assert!(holder
            .as_str()
            .ends_with(&format!(":{}", std::process::id())));
    }
}
