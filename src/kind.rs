//! The kinds of store a URL can name: the one list of them.

use std::fmt;

/// A kind of store, as the scheme of its URL names it.
///
/// ```
/// use workerid::StoreKind;
/// assert_eq!(StoreKind::from_scheme("rediss"), Some(StoreKind::Redis));
/// assert_eq!(StoreKind::Postgres.feature(), "postgres");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreKind {
    /// The in-process store: `memory://`.
    Memory,
    /// One Redis server: `redis://`, or `rediss://` over TLS.
    Redis,
    /// A Redis Cluster through any of its nodes: `redis+cluster://`, or
    /// `rediss+cluster://` over TLS.
    RedisCluster,
    /// The master Redis Sentinels name, followed through failovers:
    /// `redis+sentinel://`.
    RedisSentinel,
    /// etcd: `etcd://`, or `etcds://` over TLS.
    Etcd,
    /// PostgreSQL: `postgres://`, `postgresql://`.
    Postgres,
    /// MySQL or MariaDB: `mysql://`, `mariadb://`.
    MySql,
    /// SQLite: `sqlite://PATH`, `sqlite:PATH`.
    Sqlite,
}

impl StoreKind {
    /// Every kind, in the order the documentation lists them (a slice, so
    /// that a kind added later changes no type).
    pub const ALL: &'static [StoreKind] = &[
        StoreKind::Memory,
        StoreKind::Redis,
        StoreKind::RedisCluster,
        StoreKind::RedisSentinel,
        StoreKind::Etcd,
        StoreKind::Postgres,
        StoreKind::MySql,
        StoreKind::Sqlite,
    ];

    /// The URL schemes of this kind, plain first (lower case).
    pub fn schemes(self) -> &'static [&'static str] {
        match self {
            StoreKind::Memory => &["memory"],
            StoreKind::Redis => &["redis", "rediss"],
            StoreKind::RedisCluster => &["redis+cluster", "rediss+cluster"],
            StoreKind::RedisSentinel => &["redis+sentinel"],
            StoreKind::Etcd => &["etcd", "etcds"],
            StoreKind::Postgres => &["postgres", "postgresql"],
            StoreKind::MySql => &["mysql", "mariadb"],
            StoreKind::Sqlite => &["sqlite"],
        }
    }

    /// The kind a scheme names (any case), if any.
    pub fn from_scheme(scheme: &str) -> Option<StoreKind> {
        let scheme = scheme.to_ascii_lowercase();
        StoreKind::ALL
            .iter()
            .copied()
            .find(|kind| kind.schemes().contains(&scheme.as_str()))
    }

    /// The feature of the `workerid` crate that compiles this kind in.
    pub fn feature(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis | StoreKind::RedisCluster | StoreKind::RedisSentinel => "redis",
            StoreKind::Etcd => "etcd",
            StoreKind::Postgres => "postgres",
            StoreKind::MySql => "mysql",
            StoreKind::Sqlite => "sqlite",
        }
    }

    /// The name of the kind in spans and metrics: OpenTelemetry's
    /// `db.system.name` where it has one (`"postgresql"`, `"redis"`, ...),
    /// the `store` label of the store metrics.
    ///
    /// ```
    /// assert_eq!(workerid::StoreKind::Postgres.system_name(), "postgresql");
    /// ```
    pub fn system_name(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis | StoreKind::RedisCluster | StoreKind::RedisSentinel => "redis",
            StoreKind::Etcd => "etcd",
            StoreKind::Postgres => "postgresql",
            StoreKind::MySql => "mysql",
            StoreKind::Sqlite => "sqlite",
        }
    }

    /// Whether this build of `workerid` can open this kind.
    pub fn is_compiled_in(self) -> bool {
        match self {
            StoreKind::Memory => cfg!(feature = "memory"),
            StoreKind::Redis | StoreKind::RedisCluster | StoreKind::RedisSentinel => {
                cfg!(feature = "redis")
            }
            StoreKind::Etcd => cfg!(feature = "etcd"),
            StoreKind::Postgres => cfg!(feature = "postgres"),
            StoreKind::MySql => cfg!(feature = "mysql"),
            StoreKind::Sqlite => cfg!(feature = "sqlite"),
        }
    }

    /// The kinds this build can open.
    pub fn compiled_in() -> impl Iterator<Item = StoreKind> {
        StoreKind::ALL
            .iter()
            .copied()
            .filter(|kind| kind.is_compiled_in())
    }

    /// The URL forms this build accepts, one per line, for help texts and
    /// error messages (every tool prints this one list).
    ///
    /// ```
    /// assert!(workerid::StoreKind::accepted_urls().contains("memory://"));
    /// ```
    pub fn accepted_urls() -> String {
        StoreKind::compiled_in()
            .map(|kind| kind.url_form())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The URL form of this kind, for help texts.
    pub fn url_form(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory://  (in this process only)",
            StoreKind::Redis => {
                "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=P&durable=true]  (rediss:// for TLS, with ?cacert=FILE&cert=FILE&key=FILE)"
            }
            StoreKind::RedisCluster => {
                "redis+cluster://[[USER]:PASSWORD@]HOST:PORT,HOST:PORT[?prefix=P&durable=true&wait_replicas=N]  (rediss+cluster:// for TLS)"
            }
            StoreKind::RedisSentinel => {
                "redis+sentinel://[[USER]:PASSWORD@]HOST:PORT,HOST:PORT/MASTER[/DB][?prefix=P&durable=true&wait_replicas=N]  (the Sentinels' addresses; the credentials are the master's)"
            }
            StoreKind::Etcd => {
                "etcd://[USER:PASSWORD@]HOST:PORT,HOST:PORT[/PREFIX]  (etcds:// for TLS, with ?cacert=FILE&cert=FILE&key=FILE)"
            }
            StoreKind::Postgres => {
                "postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=verify-full&sslrootcert=FILE]"
            }
            StoreKind::MySql => {
                "mysql://USER[:PASSWORD]@HOST[:PORT]/DB  (or mariadb://; ?ssl-mode=VERIFY_IDENTITY&ssl-ca=FILE)"
            }
            StoreKind::Sqlite => "sqlite://PATH[?mode=rwc]  (mode=rwc creates the file)",
        }
    }

    /// A short name: `redis`, `redis-cluster`, `redis-sentinel`, `etcd`, `postgres`, `mysql`,
    /// `sqlite`, `memory`.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis => "redis",
            StoreKind::RedisCluster => "redis-cluster",
            StoreKind::RedisSentinel => "redis-sentinel",
            StoreKind::Etcd => "etcd",
            StoreKind::Postgres => "postgres",
            StoreKind::MySql => "mysql",
            StoreKind::Sqlite => "sqlite",
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_names_its_kind() {
        for &kind in StoreKind::ALL {
            for scheme in kind.schemes() {
                assert_eq!(StoreKind::from_scheme(scheme), Some(kind));
                assert_eq!(StoreKind::from_scheme(&scheme.to_uppercase()), Some(kind));
            }
        }
        for other in ["http", "ftp", "", "redis+unix", "sqlite3"] {
            assert_eq!(StoreKind::from_scheme(other), None, "{other}");
        }
    }
}
