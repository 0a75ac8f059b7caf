//! Opening a store from its URL: the scheme picks the store crate.
//!
//! | URL | store |
//! | --- | --- |
//! | `redis://host:port/db`, `rediss://...` | `workerid-redis` |
//! | `redis+cluster://host:port,host:port` | `workerid-redis` on a Redis Cluster |
//! | `postgres://...`, `postgresql://...` | `workerid-sql` (PostgreSQL) |
//! | `mysql://...`, `mariadb://...` | `workerid-sql` (MySQL / MariaDB) |
//! | `sqlite://path` (`?mode=rwc` to create the file) | `workerid-sql` (SQLite) |
//! | `etcd://[user:password@]host:port,host:port[/prefix]` | `workerid-etcd` (key prefix default `workerid`) |

use std::sync::Arc;
use std::time::Duration;

use workerid_core::segment::SegmentStore;
use workerid_core::{Error, LeaseStore};

use crate::error::CliError;

/// How long to wait for a connection, and for each answer.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// The kinds of store a URL can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `redis://`, `rediss://`.
    Redis,
    /// `redis+cluster://host:port,host:port`: a Redis Cluster through any of its nodes.
    RedisCluster,
    /// `postgres://`, `postgresql://`.
    Postgres,
    /// `mysql://`, `mariadb://`.
    MySql,
    /// `sqlite://path`, `sqlite:path`.
    Sqlite,
    /// `etcd://host:port,...`.
    Etcd,
}

impl Scheme {
    /// The scheme of `url`.
    ///
    /// ```
    /// use workerid_cli::open::Scheme;
    /// assert_eq!(Scheme::of("postgres://u@h/db").unwrap(), Scheme::Postgres);
    /// assert!(Scheme::of("ftp://x").is_err());
    /// ```
    ///
    /// # Errors
    /// [`CliError::BadUrl`] for a URL without a scheme or with another one.
    pub fn of(url: &str) -> Result<Scheme, CliError> {
        let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("redis" | "rediss") => Ok(Scheme::Redis),
            Some("redis+cluster") => Ok(Scheme::RedisCluster),
            Some("postgres" | "postgresql") => Ok(Scheme::Postgres),
            Some("mysql" | "mariadb") => Ok(Scheme::MySql),
            Some("sqlite") => Ok(Scheme::Sqlite),
            Some("etcd") => Ok(Scheme::Etcd),
            Some("memory") => Err(bad(
                url,
                "the memory store lives inside one process; the CLI cannot see it",
            )),
            _ => Err(bad(
                url,
                "expected redis://, etcd://, postgres://, mysql://, mariadb:// or sqlite://",
            )),
        }
    }

    /// The store's short name (`"redis"`, `"postgres"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Redis => "redis",
            Scheme::RedisCluster => "redis cluster",
            Scheme::Postgres => "postgres",
            Scheme::MySql => "mysql",
            Scheme::Sqlite => "sqlite",
            Scheme::Etcd => "etcd",
        }
    }
}

fn bad(url: &str, reason: &str) -> CliError {
    CliError::BadUrl {
        url: redact(url),
        reason: reason.to_string(),
    }
}

/// `url` with the password of its user info, if any, replaced by `***`.
///
/// ```
/// use workerid_cli::open::redact;
/// assert_eq!(redact("postgres://me:secret@db:5432/x"), "postgres://me:***@db:5432/x");
/// assert_eq!(redact("redis://127.0.0.1:6379/"), "redis://127.0.0.1:6379/");
/// ```
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// Both faces of the store a URL names.
#[derive(Debug, Clone)]
pub struct Stores {
    /// Which kind of store.
    pub scheme: Scheme,
    /// The lease store.
    pub leases: Arc<dyn LeaseStore>,
    /// The segment store (the same connection).
    pub segments: Arc<dyn SegmentStore>,
}

impl Stores {
    /// Both faces of one store handle.
    fn of<S: LeaseStore + SegmentStore + Clone>(scheme: Scheme, store: S) -> Stores {
        Stores {
            scheme,
            leases: Arc::new(store.clone()),
            segments: Arc::new(store),
        }
    }
}

/// Connects to the store `url` names.
///
/// # Errors
/// [`CliError::BadUrl`] for a URL the CLI cannot use; [`CliError::Unreachable`] when
/// the store cannot be reached (or a SQLite file does not exist).
pub async fn open(url: &str) -> Result<Stores, CliError> {
    let scheme = Scheme::of(url)?;
    let connected = match scheme {
        Scheme::Redis => workerid_redis::RedisStore::builder()
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .connect(url)
            .await
            .map(|s| Stores::of(scheme, s)),
        Scheme::RedisCluster => {
            let rest = url.split_once("://").map(|(_, r)| r).unwrap_or_default();
            let nodes: Vec<String> = rest
                .trim_end_matches('/')
                .split(',')
                .filter(|n| !n.is_empty())
                .map(|n| format!("redis://{n}/"))
                .collect();
            if nodes.is_empty() {
                return Err(bad(url, "no node: redis+cluster://host:port,host:port"));
            }
            workerid_redis::RedisStore::builder()
                .connection_timeout(TIMEOUT)
                .response_timeout(TIMEOUT)
                .connect_cluster(&nodes)
                .await
                .map(|s| Stores::of(scheme, s))
        }
        Scheme::Postgres | Scheme::MySql | Scheme::Sqlite => {
            if scheme == Scheme::Sqlite {
                check_sqlite_file(url)?;
            }
            workerid_sql::SqlStore::builder()
                .max_connections(2)
                .acquire_timeout(TIMEOUT)
                .connect(url)
                .await
                .map(|s| Stores::of(scheme, s))
        }
        Scheme::Etcd => {
            let target = EtcdTarget::parse(url)?;
            let mut builder = workerid_etcd::EtcdStore::builder()
                .connect_timeout(TIMEOUT)
                .operation_timeout(TIMEOUT);
            if let Some((user, password)) = target.credentials {
                builder = builder.credentials(user, password);
            }
            if let Some(prefix) = target.prefix {
                builder = builder.key_prefix(prefix);
            }
            builder
                .connect(&target.endpoints)
                .await
                .map(|s| Stores::of(scheme, s))
        }
    };
    connected.map_err(|e| match e {
        Error::Unavailable { .. } => CliError::Unreachable {
            url: redact(url),
            reason: e.to_string(),
        },
        Error::InvalidConfig { reason } => bad(url, &reason),
        other => CliError::Store(other),
    })
}

/// The lease store `url` names.
///
/// # Errors
/// As [`open`].
pub async fn store_from_url(url: &str) -> Result<Arc<dyn LeaseStore>, CliError> {
    Ok(open(url).await?.leases)
}

/// The segment store `url` names.
///
/// # Errors
/// As [`open`].
pub async fn segment_store_from_url(url: &str) -> Result<Arc<dyn SegmentStore>, CliError> {
    Ok(open(url).await?.segments)
}

/// What an `etcd://` URL names.
#[derive(Debug, PartialEq, Eq)]
struct EtcdTarget {
    endpoints: Vec<String>,
    credentials: Option<(String, String)>,
    prefix: Option<String>,
}

impl EtcdTarget {
    /// `etcd://[user:password@]host:port,host:port[/prefix]`.
    fn parse(url: &str) -> Result<EtcdTarget, CliError> {
        let rest = url.strip_prefix("etcd://").unwrap_or(url);
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((userinfo, rest)) => (Some(userinfo), rest),
            None => (None, rest),
        };
        let credentials = match userinfo {
            Some(info) => match info.split_once(':') {
                Some((user, password)) if !user.is_empty() => {
                    Some((user.to_string(), password.to_string()))
                }
                _ => return Err(bad(url, "credentials must be user:password@")),
            },
            None => None,
        };
        let (hosts, prefix) = match rest.split_once('/') {
            Some((hosts, prefix)) if !prefix.trim_end_matches('/').is_empty() => {
                (hosts, Some(prefix.trim_end_matches('/').to_string()))
            }
            Some((hosts, _)) => (hosts, None),
            None => (rest, None),
        };
        let endpoints: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| format!("http://{h}"))
            .collect();
        if endpoints.is_empty() {
            return Err(bad(url, "no endpoint: etcd://host:port,host:port"));
        }
        Ok(EtcdTarget {
            endpoints,
            credentials,
            prefix,
        })
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
        url: redact(url),
        reason: format!("no SQLite database file at {path} (add ?mode=rwc to create one)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit;

    #[test]
    fn schemes() {
        for (url, scheme) in [
            ("redis://h:1/", Scheme::Redis),
            ("rediss://h:1/", Scheme::Redis),
            ("redis+cluster://a:1,b:2", Scheme::RedisCluster),
            ("postgresql://h/db", Scheme::Postgres),
            ("MARIADB://h/db", Scheme::MySql),
            ("sqlite:///tmp/x.db", Scheme::Sqlite),
            ("etcd://a:2379,b:2379", Scheme::Etcd),
        ] {
            assert_eq!(Scheme::of(url).unwrap(), scheme, "{url}");
        }
        for url in ["", "localhost:6379", "http://x", "memory://"] {
            let err = Scheme::of(url).unwrap_err();
            assert_eq!(err.exit_code(), exit::USAGE, "{url}: {err}");
        }
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("mysql://root:p@ss@h:3306/db?x=1"),
            "mysql://root:***@h:3306/db?x=1"
        );
        assert_eq!(redact("redis://:pw@h/"), "redis://:***@h/");
        let err = Scheme::of("ftp://u:pw@h/").unwrap_err().to_string();
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

    #[test]
    fn etcd_urls_name_endpoints_credentials_and_a_prefix() {
        assert_eq!(
            EtcdTarget::parse("etcd://root:pw@a:2379,b:2379/app/ids").unwrap(),
            EtcdTarget {
                endpoints: vec!["http://a:2379".into(), "http://b:2379".into()],
                credentials: Some(("root".into(), "pw".into())),
                prefix: Some("app/ids".into()),
            }
        );
        assert_eq!(
            EtcdTarget::parse("etcd://a:2379").unwrap().endpoints,
            vec!["http://a:2379".to_string()]
        );
        for bad in ["etcd://", "etcd:///prefix", "etcd://:pw@a:1"] {
            assert_eq!(
                EtcdTarget::parse(bad).unwrap_err().exit_code(),
                exit::USAGE,
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn an_unreachable_etcd_is_exit_3() {
        let port = workerid_testkit::free_port();
        let err = open(&format!("etcd://127.0.0.1:{port}")).await.unwrap_err();
        assert_eq!(err.exit_code(), exit::UNREACHABLE, "{err}");
    }
}
