//! Reading a store URL: its kind, hosts, credentials, path and options.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use url::Url;

use crate::{redact_url, OpenError, StoreKind};

/// What a store URL says, its password decoded.
pub(crate) struct StoreUrl {
    pub kind: StoreKind,
    /// The URL as given (handed to drivers that read URLs themselves).
    pub raw: String,
    /// The URL with its password hidden, for messages.
    pub redacted: String,
    /// `rediss://`, `rediss+cluster://`, `etcds://`.
    pub tls: bool,
    pub user: Option<String>,
    pub password: Option<String>,
    /// `host:port` (or `host`) entries of the authority, comma-separated in
    /// the URL. Empty for the SQL stores and memory.
    pub hosts: Vec<String>,
    /// The path without its leading `/`.
    pub path: String,
    /// The query's parameters, decoded, in order.
    pub params: Vec<(String, String)>,
}

impl StoreUrl {
    /// The first server's `host:port` (no user, no password), for spans:
    /// OpenTelemetry's `server.address`. None for memory and SQLite.
    pub(crate) fn server_address(&self) -> Option<String> {
        if matches!(self.kind, StoreKind::Memory | StoreKind::Sqlite) {
            return None;
        }
        if let Some(first) = self.hosts.first() {
            return Some(first.clone());
        }
        let parsed = url::Url::parse(&self.raw).ok()?;
        let host = parsed.host_str().filter(|h| !h.is_empty())?;
        Some(match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        })
    }

    /// Reads `url`.
    ///
    /// # Errors
    /// [`OpenError::UnknownScheme`], [`OpenError::NotCompiledIn`] or
    /// [`OpenError::BadUrl`].
    pub(crate) fn parse(url: &str) -> Result<StoreUrl, OpenError> {
        let url = url.trim();
        let redacted = redact_url(url);
        let scheme = url.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
        let Some(kind) = StoreKind::from_scheme(scheme) else {
            return Err(OpenError::UnknownScheme { url: redacted });
        };
        if !kind.is_compiled_in() {
            return Err(OpenError::NotCompiledIn {
                url: redacted,
                kind,
                feature: kind.feature(),
            });
        }
        let scheme = scheme.to_ascii_lowercase();
        let mut parsed = StoreUrl {
            kind,
            raw: url.to_string(),
            redacted,
            tls: matches!(scheme.as_str(), "rediss" | "rediss+cluster" | "etcds"),
            user: None,
            password: None,
            hosts: Vec::new(),
            path: String::new(),
            params: Vec::new(),
        };
        let user_info = !matches!(kind, StoreKind::Memory | StoreKind::Sqlite);
        if user_info && !url[scheme.len()..].starts_with("://") {
            return Err(parsed.bad(format!("a {kind} URL starts {scheme}://")));
        }
        if user_info && at_after_query(url) {
            return Err(parsed.bad(
                "an '@' follows a '?' or '#': a '?' or '#' in the user name or password must be \
                 percent-encoded (%3F, %23), as must an '@' in a parameter (%40)",
            ));
        }
        match kind {
            StoreKind::Sqlite => {}
            StoreKind::Memory => parsed.read_memory()?,
            StoreKind::Postgres | StoreKind::MySql => parsed.read_sql_credentials(),
            StoreKind::Redis
            | StoreKind::RedisCluster
            | StoreKind::RedisSentinel
            | StoreKind::Etcd => parsed.read_hosts()?,
        }
        Ok(parsed)
    }

    /// A [`OpenError::BadUrl`] about this URL.
    pub(crate) fn bad(&self, reason: impl Into<String>) -> OpenError {
        OpenError::BadUrl {
            url: self.redacted.clone(),
            kind: self.kind,
            reason: reason.into(),
        }
    }

    /// The value of parameter `name`, if given (the last one wins).
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Refuses parameters not in `known`: a misspelt option must not be
    /// silently ignored.
    pub(crate) fn check_params(&self, known: &[&str]) -> Result<(), OpenError> {
        match self
            .params
            .iter()
            .find(|(key, _)| !known.contains(&key.as_str()))
        {
            Some((key, _)) => Err(self.bad(format!(
                "unknown parameter {key:?} (known: {})",
                known.join(", ")
            ))),
            None => Ok(()),
        }
    }

    /// A boolean parameter ([`StoreUrl::boolean`]); absent: false.
    pub(crate) fn flag(&self, name: &str) -> Result<bool, OpenError> {
        self.param(name)
            .map_or(Ok(false), |value| self.boolean(name, value))
    }

    /// `value` of parameter `name` as a boolean: `true`/`false`, `1`/`0`,
    /// `yes`/`no`.
    pub(crate) fn boolean(&self, name: &str, value: &str) -> Result<bool, OpenError> {
        match value {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            other => Err(self.bad(format!("{name}={other:?} is not true or false"))),
        }
    }

    /// Hides this URL's password in a driver's message (raw and
    /// percent-encoded), and any URL in it. Drivers do not repeat passwords;
    /// this is a second line of defence, so a password of fewer than
    /// [`MIN_SCRUBBED`] characters, which would match inside ordinary words,
    /// is left to the first.
    pub(crate) fn scrub(&self, message: &str) -> String {
        let mut out = message.to_string();
        if let Some(password) = self
            .password
            .as_deref()
            .filter(|p| p.chars().count() >= MIN_SCRUBBED)
        {
            let encoded = encode_user_info(password);
            for secret in [password, encoded.as_str()] {
                out = out.replace(secret, "***");
            }
        }
        if out.contains(&self.raw) {
            out = out.replace(&self.raw, &self.redacted);
        }
        out
    }

    fn read_memory(&mut self) -> Result<(), OpenError> {
        let rest = self.raw.split_once(':').map(|(_, r)| r).unwrap_or("");
        if matches!(rest, "" | "//" | "///") {
            Ok(())
        } else {
            Err(self.bad("memory:// takes no host, path or parameter"))
        }
    }

    fn read_sql_credentials(&mut self) {
        // The SQL drivers read the URL themselves; the password is only
        // needed to keep it out of their messages.
        if let Ok(url) = Url::parse(&self.raw) {
            self.password = url.password().map(decode);
            self.user = Some(decode(url.username())).filter(|u| !u.is_empty());
        }
    }

    /// `scheme://[user[:password]@]host[:port][,host[:port]...][/path][?query]`:
    /// the host list is split off, and the rest read by the `url` crate with
    /// one placeholder host.
    fn read_hosts(&mut self) -> Result<(), OpenError> {
        let (scheme, rest) = self
            .raw
            .split_once("://")
            .ok_or_else(|| self.bad("expected scheme://host:port"))?;
        let before_query = rest.find(['?', '#']).unwrap_or(rest.len());
        let hosts_start = rest[..before_query].rfind('@').map_or(0, |at| at + 1);
        let authority_end = hosts_start
            + rest[hosts_start..]
                .find(['/', '?', '#'])
                .unwrap_or(rest.len() - hosts_start);
        let (authority, tail) = rest.split_at(authority_end);
        let (user_info, host_list) = match authority.rsplit_once('@') {
            Some((user_info, hosts)) => (Some(user_info), hosts),
            None => (None, authority),
        };
        let placeholder = match user_info {
            Some(user_info) => format!("{scheme}://{user_info}@placeholder{tail}"),
            None => format!("{scheme}://placeholder{tail}"),
        };
        let url = Url::parse(&placeholder).map_err(|e| self.bad(e.to_string()))?;
        if url.fragment().is_some() {
            return Err(self.bad("a fragment (#...) means nothing here"));
        }
        self.user = Some(decode(url.username())).filter(|u| !u.is_empty());
        self.password = url.password().map(decode);
        self.path = decode(url.path().trim_start_matches('/'));
        self.params = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        for host in host_list.split(',') {
            let host = host.trim();
            if host.is_empty() {
                continue;
            }
            let checked = Url::parse(&format!("http://{host}"))
                .ok()
                .filter(|u| u.host_str().is_some() && u.path() == "/" && u.username().is_empty());
            if checked.is_none() {
                return Err(self.bad(format!("{host:?} is not HOST or HOST:PORT")));
            }
            self.hosts.push(host.to_string());
        }
        if self.hosts.is_empty() {
            return Err(self.bad("no host: expected scheme://host:port[,host:port...]"));
        }
        Ok(())
    }
}

/// Whether an `@` comes after the first `?` or `#` that follows
/// `scheme://`. A raw `?` or `#` ends the authority, so a password holding
/// one would be read in part as a host or a parameter, and shown as one in
/// messages; an `@` in a parameter cannot be told from that case.
fn at_after_query(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.find(['?', '#'])
        .is_some_and(|start| rest[start..].contains('@'))
}

/// The shortest password [`StoreUrl::scrub`] looks for.
pub(crate) const MIN_SCRUBBED: usize = 4;

/// Percent-decodes a URL component (invalid UTF-8 replaced).
fn decode(component: &str) -> String {
    percent_decode_str(component)
        .decode_utf8_lossy()
        .into_owned()
}

/// Characters a user name or password must escape in a URL.
const USER_INFO: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b':')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'@')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Percent-encodes a user name or password for a URL's user info.
pub(crate) fn encode_user_info(text: &str) -> String {
    utf8_percent_encode(text, USER_INFO).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Any text after any scheme: no panic, and whatever the answer
        /// (a URL, or `BadUrl` and the like), the password given is not in
        /// what it shows.
        #[test]
        fn any_url_parses_or_is_refused_without_showing_its_password(
            scheme in "(memory|redis|rediss|redis\\+cluster|redis\\+sentinel|etcd|etcds|postgres|mysql|mariadb|sqlite|ftp)",
            slashes in "(//)?",
            secret in "[A-Za-z0-9%@:/?=._~-]{8,16}",
            rest in "\\PC{0,40}",
        ) {
            let url = format!("{scheme}:{slashes}me:{secret}@{rest}");
            match StoreUrl::parse(&url) {
                Ok(parsed) => proptest::prop_assert!(!parsed.redacted.contains(&secret), "{}", parsed.redacted),
                Err(e) => proptest::prop_assert!(!e.to_string().contains(&secret), "{url} -> {e}"),
            }
            let _ = StoreUrl::parse(&rest);
        }
    }

    #[test]
    #[cfg(feature = "etcd")]
    fn host_lists_credentials_prefix_and_options() {
        let url =
            StoreUrl::parse("etcds://root:p%2Fw%40x@a:2379,[::1]:2380/app/ids?cacert=/ca.pem")
                .unwrap();
        assert_eq!(url.kind, StoreKind::Etcd);
        assert!(url.tls);
        assert_eq!(url.hosts, ["a:2379", "[::1]:2380"]);
        assert_eq!(url.user.as_deref(), Some("root"));
        assert_eq!(url.password.as_deref(), Some("p/w@x"));
        assert_eq!(url.path, "app/ids");
        assert_eq!(url.param("cacert"), Some("/ca.pem"));
        assert!(!url.redacted.contains("p%2Fw"));
        for bad in [
            "etcd://",
            "etcd:///prefix",
            "etcd://a:notaport",
            "etcd://a/b#frag",
        ] {
            assert!(
                matches!(StoreUrl::parse(bad), Err(OpenError::BadUrl { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    #[cfg(all(feature = "postgres", feature = "sqlite", feature = "redis"))]
    fn the_server_address_names_host_and_port_only() {
        let address = |url: &str| StoreUrl::parse(url).unwrap().server_address();
        assert_eq!(
            address("postgres://u:secret@db.example:5433/ids").as_deref(),
            Some("db.example:5433")
        );
        assert_eq!(
            address("redis+cluster://:secret@r1:6380,r2:6381/").as_deref(),
            Some("r1:6380")
        );
        assert_eq!(address("sqlite://ids.db"), None);
        assert_eq!(address("memory://"), None);
    }

    #[test]
    #[cfg(all(feature = "redis", feature = "etcd", feature = "postgres"))]
    fn a_raw_question_mark_or_hash_in_a_password_is_never_shown() {
        for (url, secrets) in [
            ("redis://:hunter2?x@127.0.0.1:6379/", &["hunter2"][..]),
            (
                "etcds://root:s3cretpw?cacert=/x@127.0.0.1:2379",
                &["s3cretpw"],
            ),
            ("redis://:hunter2#x@127.0.0.1:6379/", &["hunter2"]),
            ("redis://u:6379?x@127.0.0.1:6379/", &["6379?x", "x@"]),
            ("redis://:pw@h?x@127.0.0.1:6379/", &["x@", "pw@h"]),
            ("redis+cluster://:hun?ter2@a:1,b:2", &["hun?ter2", "hun\""]),
            (
                "postgres://ops:1234?sslmode=disable@127.0.0.1/db",
                &["1234"],
            ),
        ] {
            let err = StoreUrl::parse(url).err().expect(url);
            assert!(matches!(err, OpenError::BadUrl { .. }), "{url}: {err}");
            let shown = format!("{err}\n{err:?}");
            for secret in secrets {
                assert!(!shown.contains(secret), "{url} shows {secret:?}: {shown}");
            }
            assert!(shown.contains("percent-encoded"), "{shown}");
        }
        // Encoded, they are read.
        let url = StoreUrl::parse("redis://:hunter2%3Fx%23y@127.0.0.1:6379/?prefix=a%40b").unwrap();
        assert_eq!(url.password.as_deref(), Some("hunter2?x#y"));
        assert_eq!(url.hosts, ["127.0.0.1:6379"]);
        assert_eq!(url.param("prefix"), Some("a@b"));
    }

    #[test]
    fn unknown_schemes_are_named_without_the_password() {
        let err = StoreUrl::parse("ftp://me:hunter2@h/").err().unwrap();
        assert!(matches!(err, OpenError::UnknownScheme { .. }));
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn a_password_is_scrubbed_from_driver_messages() {
        let url = StoreUrl {
            kind: StoreKind::Postgres,
            raw: "postgres://u:a%2Fbcd@h/db".into(),
            redacted: "postgres://u:***@h/db".into(),
            tls: false,
            user: Some("u".into()),
            password: Some("a/bcd".into()),
            hosts: Vec::new(),
            path: String::new(),
            params: Vec::new(),
        };
        let said = url.scrub("failed for postgres://u:a%2Fbcd@h/db with a/bcd, not with bcd");
        assert_eq!(
            said,
            "failed for postgres://u:***@h/db with ***, not with bcd"
        );
    }

    #[test]
    fn user_info_round_trips() {
        for text in ["plain", "a/b@c:d", "100% ?#[]"] {
            assert_eq!(decode(&encode_user_info(text)), text);
        }
    }
}
