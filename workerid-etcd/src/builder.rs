//! Connecting: endpoints, credentials, prefix, timeouts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{ConnectOptions, GetOptions};
use workerid_core::{redact_url, Error, Result};

use crate::cluster::Cluster;
use crate::keys::{check_prefix, DEFAULT_PREFIX};
use crate::member::MemberSettings;
use crate::{EtcdStore, Inner};

/// The longest connect or operation timeout: an hour, far past any
/// useful wait, and short enough that a deadline is always an instant.
const MAX_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// Options of an [`EtcdStore`]; made by [`EtcdStore::builder`].
///
/// ```no_run
/// # async fn demo() -> workerid_core::Result<()> {
/// use std::time::Duration;
/// let store = workerid_etcd::EtcdStore::builder()
///     .key_prefix("myapp/ids")
///     .credentials("root", "secret")
///     .request_timeout(Duration::from_millis(500))
///     .operation_timeout(Duration::from_secs(3))
///     .connect(["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"])
///     .await?;
/// # Ok(()) }
/// ```
///
/// With the feature `tls-rustls` (on by default), `https://` endpoints
/// connect over TLS, trusting the system's roots or the CA given with
/// [`ca_certificate_pem`](Self::ca_certificate_pem), and presenting the
/// client certificate given with
/// [`client_identity_pem`](Self::client_identity_pem).
#[derive(Clone)]
pub struct EtcdStoreBuilder {
    prefix: String,
    credentials: Option<(String, String)>,
    connect_timeout: Duration,
    request_timeout: Duration,
    operation_timeout: Duration,
    min_ttl: Duration,
    prefer_leader: bool,
    leader_check_interval: Duration,
    #[cfg(feature = "tls-rustls")]
    tls: crate::tls::TlsMaterial,
}

/// Shows the user of the credentials, never the password or a key.
impl std::fmt::Debug for EtcdStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let credentials = self
            .credentials
            .as_ref()
            .map(|(user, _)| format!("{user}:***"));
        let mut out = f.debug_struct("EtcdStoreBuilder");
        out.field("prefix", &self.prefix)
            .field("credentials", &credentials)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("min_ttl", &self.min_ttl)
            .field("prefer_leader", &self.prefer_leader)
            .field("leader_check_interval", &self.leader_check_interval);
        #[cfg(feature = "tls-rustls")]
        out.field("tls", &self.tls);
        out.finish()
    }
}

impl Default for EtcdStoreBuilder {
    fn default() -> Self {
        EtcdStoreBuilder {
            prefix: DEFAULT_PREFIX.to_string(),
            credentials: None,
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
            operation_timeout: Duration::from_secs(5),
            min_ttl: Duration::from_secs(2),
            prefer_leader: true,
            leader_check_interval: Duration::from_secs(10),
            #[cfg(feature = "tls-rustls")]
            tls: Default::default(),
        }
    }
}

impl EtcdStoreBuilder {
    /// The first part of every key (default `workerid`): `<prefix>/ns/<namespace>/...`.
    /// 1 to 64 bytes of `[A-Za-z0-9._:-]` parts separated by `/`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// A user and password, for a cluster with authentication enabled.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some((user.into(), password.into()));
        self
    }

    /// Trusts only the CA of this PEM certificate (instead of the system's
    /// roots) for `https://` endpoints.
    #[cfg(feature = "tls-rustls")]
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(pem.into());
        self
    }

    /// Presents this client certificate and private key (PEM) to
    /// `https://` endpoints, for members run with `--client-cert-auth`.
    #[cfg(feature = "tls-rustls")]
    pub fn client_identity_pem(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// The name the members' certificates must be valid for (default: the
    /// host of each endpoint).
    #[cfg(feature = "tls-rustls")]
    pub fn tls_domain_name(mut self, name: impl Into<String>) -> Self {
        self.tls.domain = Some(name.into());
        self
    }

    /// How long to wait for a TCP connection to one member (default 1 s,
    /// at most an hour); a TLS handshake gets as long again.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one request to one member may take (default 1 s); past it,
    /// the store tries the next member.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long an operation may take in all, retries on other members
    /// included (default 5 s, at most an hour); past it, `Unavailable`.
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// The shortest ttl the servers grant (default 2 s: etcd's minimum with
    /// the default heartbeat of 100 ms and election timeout of 1 s is
    /// 1.5 × election timeout, rounded up to a second). Shorter ttls are
    /// refused with `InvalidConfig`; etcd itself would silently lengthen them.
    pub fn min_ttl(mut self, ttl: Duration) -> Self {
        self.min_ttl = ttl;
        self
    }

    /// Whether to send every request to the leader when it is among the
    /// endpoints (default true). A follower forwards writes and lease
    /// keep-alives to the leader, so the leader answers sooner, by one hop.
    ///
    /// The store asks which member leads when it connects, every
    /// [`leader_check_interval`](Self::leader_check_interval), and a second
    /// after a member failed, in the background; the leader's client URLs
    /// (its `--advertise-client-urls`) must match one of the endpoints by
    /// host and port. When they do not, or with false, the store uses the
    /// first endpoint that works.
    pub fn prefer_leader(mut self, prefer: bool) -> Self {
        self.prefer_leader = prefer;
        self
    }

    /// How often the store checks the cluster while nothing fails (default
    /// 10 s): which member leads (see [`prefer_leader`](Self::prefer_leader))
    /// and how many members it has (a single member renews leases with a
    /// keep-alive alone, see the crate docs). A zero interval is refused by
    /// [`connect`](Self::connect) with `InvalidConfig`.
    pub fn leader_check_interval(mut self, interval: Duration) -> Self {
        self.leader_check_interval = interval;
        self
    }

    /// Connects to the members at `endpoints` and checks that the cluster
    /// answers a linearizable read.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for no endpoint, a bad endpoint, prefix,
    /// minimum ttl, timeout or leader check interval, `https://` endpoints
    /// mixed with others or without the feature `tls-rustls`;
    /// [`Error::Unavailable`] when no member answers within the operation
    /// timeout, or a member's certificate is refused (at once).
    pub async fn connect<E: AsRef<str>>(
        self,
        endpoints: impl IntoIterator<Item = E>,
    ) -> Result<EtcdStore> {
        check_prefix(&self.prefix)?;
        let urls: Vec<String> = endpoints
            .into_iter()
            .map(|e| e.as_ref().trim().to_string())
            .collect();
        if urls.is_empty() {
            return Err(Error::invalid_config("etcd: no endpoint given"));
        }
        for url in &urls {
            check_endpoint(url)?;
        }
        let https = urls.iter().filter(|url| is_https(url)).count();
        if https != 0 && https != urls.len() {
            return Err(Error::invalid_config(format!(
                "etcd endpoints {:?} mix https:// with plain ones: use one or the other",
                urls.iter().map(|url| redact_url(url)).collect::<Vec<_>>()
            )));
        }
        #[cfg(not(feature = "tls-rustls"))]
        if https != 0 {
            return Err(Error::invalid_config(
                "etcd https:// endpoints need the feature `tls-rustls` of workerid-etcd",
            ));
        }
        if self.min_ttl < Duration::from_secs(1) || self.min_ttl.subsec_nanos() != 0 {
            return Err(Error::invalid_config(format!(
                "etcd: min_ttl {:?} must be a whole number of seconds, at least 1 s",
                self.min_ttl
            )));
        }
        if self.request_timeout.is_zero() || self.operation_timeout < self.request_timeout {
            return Err(Error::invalid_config(format!(
                "etcd: the request timeout ({:?}) must be positive and at most the operation \
                 timeout ({:?})",
                self.request_timeout, self.operation_timeout
            )));
        }
        if self.operation_timeout > MAX_TIMEOUT || self.connect_timeout > MAX_TIMEOUT {
            return Err(Error::invalid_config(format!(
                "etcd: the operation timeout ({:?}) and the connect timeout ({:?}) must be at \
                 most {MAX_TIMEOUT:?}",
                self.operation_timeout, self.connect_timeout
            )));
        }
        if self.leader_check_interval.is_zero() {
            return Err(Error::invalid_config(
                "etcd: the leader check interval must be positive",
            ));
        }
        let mut options = ConnectOptions::new().with_require_leader(true);
        if let Some((user, password)) = &self.credentials {
            options = options.with_user(user.clone(), password.clone());
        }
        #[allow(unused_mut)]
        let mut member = MemberSettings {
            options,
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            #[cfg(feature = "tls-rustls")]
            tls: None,
        };
        #[cfg(feature = "tls-rustls")]
        if https != 0 {
            member.tls = Some(self.tls.options(self.connect_timeout));
        }
        let check = (self.leader_check_interval, self.prefer_leader);
        let cluster = Cluster::new(urls, member, self.operation_timeout, check);
        let probe = format!("{}/", self.prefix);
        cluster
            .call("connect", |mut c| {
                let probe = probe.clone();
                async move {
                    c.get(
                        probe,
                        Some(GetOptions::new().with_prefix().with_count_only()),
                    )
                    .await
                }
            })
            .await?;
        cluster.check_now().await;
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                cluster,
                prefix: self.prefix,
                min_ttl: self.min_ttl,
                candidates: 8,
                mirrors: Mutex::default(),
                held: Mutex::new(HashMap::new()),
                tags: Mutex::new(HashMap::new()),
                spares: Default::default(),
                keep_alives: Default::default(),
                request_timeout: self.request_timeout,
                tag_locks: Mutex::new(HashMap::new()),
            }),
        })
    }
}

/// `url` without its `http://` or `https://`.
pub(crate) fn without_scheme(url: &str) -> &str {
    url.strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url)
}

/// Whether `url` asks for TLS (`https://`).
fn is_https(url: &str) -> bool {
    url.get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// `http://host:port`, `https://host:port` or `host:port`; no user info
/// (credentials go to [`EtcdStoreBuilder::credentials`], where they are
/// kept out of errors).
fn check_endpoint(url: &str) -> Result<()> {
    let rest = without_scheme(url);
    let ok = match rest.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && !host.contains(['/', '@'])
                && port.trim_end_matches('/').parse::<u16>().is_ok()
        }
        None => false,
    };
    if ok && crate::member::endpoint(url).is_ok() {
        Ok(())
    } else {
        Err(Error::invalid_config(format!(
            "etcd endpoint {:?} is not http://host:port or https://host:port",
            redact_url(url)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        for good in [
            "http://127.0.0.1:2379",
            "https://etcd.local:2379/",
            "etcd:2379",
        ] {
            assert!(check_endpoint(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "http://",
            "etcd",
            "http://etcd:port",
            "http://a/b:1",
            ":2379",
            "http://root:pw@etcd:2379",
            "http://et cd:2379",
        ] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }
}
