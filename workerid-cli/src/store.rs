//! Opening the store a `--store` URL names, through the facade's `open`,
//! with the `--timeout` and the CLI's rules for SQLite files.

use workerid::{AnyStore, OpenError, OpenOptions, StoreKind};

use crate::args::Target;
use crate::error::CliError;

/// Connects to the store `target` names, waiting at most its timeout to
/// connect and for each answer. A command that only reads passes
/// `read_only`: it never creates tables, and a database without them is
/// "not initialised" (exit 4) instead of silently set up.
///
/// # Errors
/// [`CliError::BadUrl`] for a URL the CLI cannot use (the memory store, a
/// missing SQLite file); the facade's [`OpenError`]s otherwise.
pub async fn open(target: Target<'_>, read_only: bool) -> Result<AnyStore, CliError> {
    let url = target.url;
    let scheme = url.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
    match StoreKind::from_scheme(scheme) {
        Some(StoreKind::Memory) => {
            return Err(bad(
                url,
                "the memory store lives inside one process; the CLI cannot see it",
            ))
        }
        Some(StoreKind::Sqlite) => check_sqlite_file(url)?,
        _ => {}
    }
    Ok(OpenOptions::new()
        .connect_timeout(target.timeout)
        .request_timeout(target.timeout)
        .max_connections(2)
        .read_only(read_only)
        .open(url)
        .await?)
}

fn bad(url: &str, reason: &str) -> CliError {
    CliError::BadUrl {
        url: workerid::redact_url(url),
        reason: reason.to_string(),
    }
}

impl From<OpenError> for CliError {
    fn from(e: OpenError) -> Self {
        CliError::Open(e)
    }
}

/// A SQLite URL must name an existing file, unless it asks for one to be
/// created (`mode=rwc`) or is in memory: an operator's typo must not
/// create an empty database and report it empty.
fn check_sqlite_file(url: &str) -> Result<(), CliError> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() {
        return Err(bad(url, "no database file: sqlite://PATH"));
    }
    let creates = query
        .split('&')
        .any(|kv| kv == "mode=rwc" || kv == "mode=memory");
    if creates || path == ":memory:" || std::path::Path::new(path).is_file() {
        return Ok(());
    }
    Err(CliError::Unreachable {
        url: workerid::redact_url(url),
        reason: format!("no SQLite database file at {path} (add ?mode=rwc to create one)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit;
    use std::time::Duration;

    fn open(
        url: &str,
        read_only: bool,
    ) -> impl std::future::Future<Output = Result<AnyStore, CliError>> + '_ {
        let target = Target {
            url,
            timeout: Duration::from_secs(3),
        };
        super::open(target, read_only)
    }

    #[tokio::test]
    async fn urls_the_cli_cannot_use_are_usage_errors() {
        for url in [
            "",
            "localhost:6379",
            "http://x",
            "memory://",
            "rediss://127.0.0.1:1/0%23insecure",
            "redis://:hunter2?x@127.0.0.1:1/",
            "postgres://ops@127.0.0.1:1/ids?sslpassword=keyPassphrase1",
        ] {
            let err = open(url, true).await.unwrap_err();
            assert_eq!(err.exit_code(), exit::USAGE, "{url}: {err}");
            for secret in ["hunter2", "keyPassphrase1"] {
                assert!(!err.to_string().contains(secret), "{url}: {err}");
            }
        }
        let err = open("ftp://u:pw@h/", true).await.unwrap_err().to_string();
        assert!(!err.contains("pw@"), "{err}");
    }

    #[test]
    fn missing_sqlite_files_are_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.db");
        let url = format!("sqlite://{}", path.display());
        assert_eq!(
            check_sqlite_file(&url).unwrap_err().exit_code(),
            exit::UNREACHABLE
        );
        assert!(check_sqlite_file(&format!("{url}?mode=rwc")).is_ok());
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn an_unreachable_etcd_is_exit_3() {
        let port = workerid_testkit::free_port();
        let err = open(&format!("etcd://127.0.0.1:{port}"), true)
            .await
            .unwrap_err();
        assert_eq!(err.exit_code(), exit::UNREACHABLE, "{err}");
    }
}
