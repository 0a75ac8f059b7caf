//! Store URLs with their secrets hidden, for errors, logs and `Debug`.

/// Query parameters whose values are secrets (compared without case).
const SECRET_PARAMS: [&str; 4] = ["password", "pass", "secret", "token"];

/// `url` with every secret replaced by `***`: the password of its user info
/// and the values of `password=`, `pass=`, `secret=` and `token=` query
/// parameters.
///
/// It works on text, not on a parsed URL, so that a URL too broken to parse
/// (a raw `/` or `@` in the password) is hidden too: everything between the
/// first `:` after `scheme://` and the last `@` before the query is taken as
/// the password.
///
/// ```
/// use workerid_core::redact_url;
/// assert_eq!(redact_url("postgres://me:secret@db:5432/x"), "postgres://me:***@db:5432/x");
/// assert_eq!(redact_url("redis://:p/a@ss@h:6379/0"), "redis://:***@h:6379/0");
/// assert_eq!(redact_url("mysql://h/db?user=me&password=pw"), "mysql://h/db?user=me&password=***");
/// assert_eq!(redact_url("etcd://a:2379,b:2379/ids"), "etcd://a:2379,b:2379/ids");
/// ```
pub fn redact_url(url: &str) -> String {
    // Secret parameters first: an '@' in their values must not be taken
    // for the end of the user info.
    let url = redact_params(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return url;
    };
    let Some((user_info, host_on)) = rest.rsplit_once('@') else {
        return url;
    };
    match user_info.split_once(':') {
        Some((user, _)) if !user.contains(['/', '?']) => format!("{scheme}://{user}:***@{host_on}"),
        // No password; or the '@' is in a path (`sqlite:///a@b.db`) or a query.
        _ => url,
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
        let secret = SECRET_PARAMS.iter().find(|key| {
            rest.get(..key.len() + 1).is_some_and(|head| {
                head[..key.len()].eq_ignore_ascii_case(key) && head.ends_with('=')
            })
        });
        if let Some(key) = secret {
            out.push_str(&rest[..=key.len()]);
            out.push_str("***");
            let end = rest.find(['&', '#']).unwrap_or(rest.len());
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
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
    fn no_password_survives() {
        let secrets = ["s3cr3t", "a/b@c", "p@ss:w/rd", "%2F%40", "x?y=z", "::@@//"];
        for secret in secrets {
            for url in [
                format!("postgres://me:{secret}@h:1/db"),
                format!("redis://:{secret}@h:1/"),
                format!("etcd://root:{secret}@a:1,b:2/prefix"),
                format!("mysql://h/db?password={secret}"),
                format!("postgres://u@h:5432/db?password={secret}&sslmode=require"),
            ] {
                let shown = redact_url(&url);
                assert!(!shown.contains(secret), "{url} -> {shown}");
            }
        }
    }
}
