//! Store URLs with their secrets hidden, for errors, logs and `Debug`.

/// A query parameter whose name, percent-decoded and lower-cased, contains
/// one of these has its value hidden: drivers read decoded names
/// (`pass%77ord` is `password`), and their secret parameters go by many
/// names (`sslpassword`, `auth_token`, `ssl-key`, ...). Hiding a value that
/// was no secret (a key file's path) costs nothing.
const SECRET_WORDS: [&str; 4] = ["pass", "secret", "token", "key"];

/// `url` with every secret replaced by `***`: the password of its user info
/// and the value of every query parameter whose name, percent-decoded and
/// without regard to case, contains `pass`, `secret`, `token` or `key`.
///
/// It works on text, not on a parsed URL, so that a URL too broken to parse
/// (a raw `/` or `@` in the password, no `//` after the scheme) is hidden
/// too: everything between the first `:` after `scheme://` (or `scheme:`)
/// and the last `@` is taken as the password. It fails closed: text that
/// does not start with a scheme (a quoted URL, `REDIS_URL=redis://...`, a
/// stray `/`) has everything between its first `:` and its last `@`
/// hidden, whatever that was.
///
/// ```
/// use workerid_core::redact_url;
/// assert_eq!(redact_url("postgres://me:secret@db:5432/x"), "postgres://me:***@db:5432/x");
/// assert_eq!(redact_url("redis://:p/a@ss@h:6379/0"), "redis://:***@h:6379/0");
/// assert_eq!(redact_url("mysql://h/db?user=me&password=pw"), "mysql://h/db?user=me&password=***");
/// assert_eq!(redact_url("postgres://h/db?SSLPass%77ord=pw"), "postgres://h/db?SSLPass%77ord=***");
/// assert_eq!(redact_url("etcd://a:2379,b:2379/ids"), "etcd://a:2379,b:2379/ids");
/// assert_eq!(redact_url("\"redis://:pw@h/\""), "\"redis:***@h/\"");
/// ```
pub fn redact_url(url: &str) -> String {
    // Secret parameters first: an '@' in their values must not be taken
    // for the end of the user info.
    let url = redact_params(url);
    // `scheme://` or, in a URL written without the slashes, `scheme:`: the
    // first ':' ends the scheme (a "://" further on may be in a password).
    let Some(scheme_end) = url.find(':').and_then(|at| {
        let scheme = &url[..at];
        let is_scheme = !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        let slashes = if url[at + 1..].starts_with("//") {
            2
        } else {
            0
        };
        is_scheme.then_some(at + 1 + slashes)
    }) else {
        return hide_between_first_colon_and_last_at(url);
    };
    let (scheme, rest) = url.split_at(scheme_end);
    let Some((user_info, host_on)) = rest.rsplit_once('@') else {
        return url;
    };
    match user_info.split_once(':') {
        Some((user, _)) => format!("{scheme}{user}:***@{host_on}"),
        // No password; or the '@' is in a path (`sqlite:///a@b.db`).
        None => url,
    }
}

/// `text` with everything between its first `:` and its last `@` (when
/// the `@` comes after the `:`) replaced by `***`.
fn hide_between_first_colon_and_last_at(text: String) -> String {
    match (text.find(':'), text.rfind('@')) {
        (Some(colon), Some(at)) if colon < at => {
            format!("{}:***{}", &text[..colon], &text[at..])
        }
        _ => text,
    }
}

/// `text` with the value of every secret parameter (`?key=` or `&key=`,
/// up to the next `&` or `#`) replaced by `***`.
fn redact_params(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['?', '&']) {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let key_end = rest.find(['=', '&', '#', '?']).unwrap_or(rest.len());
        if rest[key_end..].starts_with('=') && is_secret(&rest[..key_end]) {
            out.push_str(&rest[..=key_end]);
            out.push_str("***");
            let end = rest.find(['&', '#']).unwrap_or(rest.len());
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// Whether the parameter named `key` (as written in the URL) holds a
/// secret: its name read as a driver reads it (percent-decoded, `+` a
/// space), lower-cased, contains one of [`SECRET_WORDS`].
fn is_secret(key: &str) -> bool {
    let name = percent_decode(&key.replace('+', " ")).to_lowercase();
    SECRET_WORDS.iter().any(|word| name.contains(word))
}

/// `text` with each `%XX` replaced by its byte (invalid UTF-8 replaced),
/// anything else kept as it is.
fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_with_reserved_characters_are_hidden() {
        for (url, redacted) in [
            (
                "postgres://ops:se%2Fcr%40t@db:5432/app",
                "postgres://ops:***@db:5432/app",
            ),
            ("postgres://ops:se/cr@t@db/app", "postgres://ops:***@db/app"),
            (
                "rediss://:pw@h:6380/?cacert=/ca.pem",
                "rediss://:***@h:6380/?cacert=/ca.pem",
            ),
            ("redis://user@h/", "redis://user@h/"),
            (
                "sqlite:///tmp/a@b.db?mode=rwc",
                "sqlite:///tmp/a@b.db?mode=rwc",
            ),
            ("sqlite://relative@x.db", "sqlite://relative@x.db"),
            ("not a url", "not a url"),
            ("postgres:ops:pw@db/app", "postgres:ops:***@db/app"),
            ("redis::pw@h:1/", "redis::***@h:1/"),
            ("sqlite:/tmp/a@b.db", "sqlite:/tmp/a@b.db"),
            ("sqlite:a:b@c.db", "sqlite:a:***@c.db"),
            ("etcd://root:p@ss@a:1,b:2/x", "etcd://root:***@a:1,b:2/x"),
            (
                "pg://h/d?PASSWORD=x&sslmode=require#f",
                "pg://h/d?PASSWORD=***&sslmode=require#f",
            ),
        ] {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }

    #[test]
    fn text_that_is_not_quite_a_url_hides_its_password_too() {
        for url in [
            "redis:/:hunter2@localhost",
            "redis//:hunter2@localhost",
            "\"redis://:hunter2@localhost\"",
            "REDIS_URL=redis://:hunter2@localhost",
            "<redis://:hunter2@localhost>",
            " redis://:hunter2@localhost",
            "redis:/u:hunter2@localhost/0",
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains("hunter2"), "{url} -> {shown}");
            assert!(shown.contains("***@localhost"), "{url} -> {shown}");
        }
    }

    #[test]
    fn no_password_survives() {
        let secrets = ["s3cr3t", "a/b@c", "p@ss:w/rd", "%2F%40", "x?y=z", "::@@//"];
        for secret in secrets {
            for url in [
                format!("postgres://me:{secret}@h:1/db"),
                format!("redis://:{secret}@h:1/"),
                format!("etcd://root:{secret}@a:1,b:2/prefix"),
                format!("mysql://h/db?password={secret}"),
                format!("postgres://u@h:5432/db?password={secret}&sslmode=require"),
                format!("postgres:me:{secret}@h:1/db"),
                format!("redis::{secret}@h:1/"),
            ] {
                let shown = redact_url(&url);
                assert!(!shown.contains(secret), "{url} -> {shown}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Any password (reserved characters, escapes, `@` and `:` included;
        /// not `&` or `#`, which end a query value for every driver) in the
        /// user info or in a password parameter, of any store's URL.
        #[test]
        fn no_password_survives_any_url(
            secret in "[A-Za-z0-9/@:?=%+._~!$'()*,;-]{6,24}",
            scheme in "(postgres|mysql|mariadb|redis|rediss|etcd|etcds|redis\\+sentinel)",
            host in "[a-z0-9.]{1,12}(:[0-9]{1,5})?(,[a-z0-9.]{1,12}:[0-9]{1,5})?",
            path in "(/[a-z0-9]{0,8})?",
            query in "(\\?[a-z]{1,6}=[a-z0-9]{1,6})?",
        ) {
            for url in [
                format!("{scheme}://me:{secret}@{host}{path}{query}"),
                format!("{scheme}://:{secret}@{host}{path}{query}"),
                format!("{scheme}:me:{secret}@{host}{path}"),
                format!("{scheme}://{host}{path}?password={secret}"),
                format!("{scheme}://u@{host}{path}?sslpassword={secret}&mode=x"),
                format!("\"{scheme}://me:{secret}@{host}{path}\""),
                format!("URL={scheme}://:{secret}@{host}{path}"),
                format!("{scheme}:/me:{secret}@{host}{path}"),
            ] {
                let shown = redact_url(&url);
                proptest::prop_assert!(!shown.contains(&secret), "{} -> {}", url, shown);
            }
        }

        /// Whatever the text, redaction neither panics nor lengthens a URL
        /// by more than its stars.
        #[test]
        fn any_text_is_redacted_without_a_panic(url in "\\PC{0,64}") {
            let shown = redact_url(&url);
            proptest::prop_assert!(shown.len() <= url.len() + 3 * url.matches(['=', ':']).count() + 3);
        }
    }

    #[test]
    fn secret_parameters_are_found_by_their_decoded_name() {
        for (url, redacted) in [
            (
                "postgres://u@h/db?pass%77ord=hunter22",
                "postgres://u@h/db?pass%77ord=***",
            ),
            (
                "postgres://u@h/db?%50ASSWORD=hunter22&sslmode=require",
                "postgres://u@h/db?%50ASSWORD=***&sslmode=require",
            ),
            (
                "postgres://ops@127.0.0.1:1/ids?sslpassword=keyPassphrase1",
                "postgres://ops@127.0.0.1:1/ids?sslpassword=***",
            ),
            (
                "mysql://h/db?ssl-mode=REQUIRED&ssl-key=/k.pem#f",
                "mysql://h/db?ssl-mode=REQUIRED&ssl-key=***#f",
            ),
            ("etcd://h:1/?sslkey=/k.pem", "etcd://h:1/?sslkey=***"),
            ("x://h/?API_Key=abc&q=1", "x://h/?API_Key=***&q=1"),
            ("x://h/?auth_token=abc", "x://h/?auth_token=***"),
            ("x://h/?client%5Fsecret=abc", "x://h/?client%5Fsecret=***"),
            ("x://h/?pass+word=abc", "x://h/?pass+word=***"),
            // Not secrets: the value of another parameter, a name alone.
            ("x://h/?mode=rwc&key", "x://h/?mode=rwc&key"),
            ("x://h/?k%65=v", "x://h/?k%65=v"),
            ("x://h/?bad%zzpass=v", "x://h/?bad%zzpass=***"),
        ] {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }

    #[test]
    fn encoded_names_hide_their_values() {
        for key in [
            "pass%77ord",
            "PASS%57ORD",
            "%70assword",
            "sslpassword",
            "SSLKey",
            "to%6Ben",
            "my_secret",
        ] {
            let url = format!("postgres://u@h:1/db?{key}=hunter22&sslmode=require");
            let shown = redact_url(&url);
            assert!(!shown.contains("hunter22"), "{url} -> {shown}");
            assert!(shown.ends_with("&sslmode=require"), "{url} -> {shown}");
        }
    }

    #[test]
    fn percent_decoding_keeps_what_is_not_an_escape() {
        assert_eq!(percent_decode("a%41%2x%"), "aA%2x%");
        assert_eq!(percent_decode("%+1%e2%82%ac"), "%+1\u{20ac}");
    }
}
