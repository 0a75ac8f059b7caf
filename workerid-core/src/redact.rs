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
    let (head, rest) = redact_user_info(url);
    match rest.split_once('?') {
        Some((path, query)) => format!("{head}{path}?{}", redact_query(query)),
        None => format!("{head}{rest}"),
    }
}

/// Splits `url` into its part up to the host, password hidden, and the rest.
fn redact_user_info(url: &str) -> (String, &str) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (String::new(), url);
    };
    let Some((user_info, host_on)) = rest.rsplit_once('@') else {
        return (format!("{scheme}://"), rest);
    };
    match user_info.split_once(':') {
        Some((user, _)) if !user.contains(['/', '?']) => {
            (format!("{scheme}://{user}:***@"), host_on)
        }
        // No password; or the '@' is in a path (`sqlite:///a@b.db`) or a query.
        _ => (format!("{scheme}://"), rest),
    }
}

fn redact_query(query: &str) -> String {
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query, None),
    };
    let mut out: Vec<String> = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((key, _))
                if SECRET_PARAMS
                    .iter()
                    .any(|secret| key.eq_ignore_ascii_case(secret)) =>
            {
                out.push(format!("{key}=***"));
            }
            _ => out.push(pair.to_string()),
        }
    }
    let mut joined = out.join("&");
    if let Some(fragment) = fragment {
        joined.push('#');
        joined.push_str(fragment);
    }
    joined
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
            ] {
                let shown = redact_url(&url);
                assert!(!shown.contains(secret), "{url} -> {shown}");
            }
        }
    }
}
