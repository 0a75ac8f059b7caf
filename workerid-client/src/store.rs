//! The connection to the server, and what it learned at connect time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};
use workerid_core::{redact_url, Capabilities};
use workerid_proto::v1::leases_client::LeasesClient;
use workerid_proto::v1::segments_client::SegmentsClient;
use workerid_proto::v1::{CapabilitiesRequest, SegmentRange};
use workerid_segment::SegmentCapabilities;

/// The longest timeout or keep-alive period a builder takes: an hour, far
/// past any useful wait, and short enough that a deadline is an instant.
const MAX_PERIOD: Duration = Duration::from_secs(60 * 60);

/// Adds the bearer token to every call, and the request timeout as the
/// call's deadline (`grpc-timeout`), so that the server gives up on a call
/// when the client does.
#[derive(Clone)]
pub(crate) struct Bearer {
    token: Option<MetadataValue<Ascii>>,
    timeout: Duration,
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = &self.token {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        request.set_timeout(self.timeout);
        Ok(request)
    }
}

pub(crate) type Leases = LeasesClient<InterceptedService<Channel, Bearer>>;
pub(crate) type Segments = SegmentsClient<InterceptedService<Channel, Bearer>>;

/// Why [`ServerStoreBuilder::connect`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL or the token cannot be used.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The server did not answer. Trying again later can help.
    #[error("workerid-server at {url} unavailable: {reason}")]
    Unavailable {
        /// The server's URL, its password hidden.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The server answered, but refused the bearer token, or serves no
    /// `workerid.v1.Leases` and `workerid.v1.Segments` (not a
    /// workerid-server, or one without its gRPC API). Trying again does not
    /// help.
    #[error("workerid-server at {url} refused: {reason}")]
    Refused {
        /// The server's URL, its password hidden.
        url: String,
        /// What the server said.
        reason: String,
    },
}

/// A lease and segment store that is a running `workerid-server` (see the
/// [crate docs](crate)). Cheap to clone: clones share one HTTP/2
/// connection, and the receipts of the ranges they reserved.
///
/// A give-back is taken only for a range reserved through this store (or a
/// clone of it): the server signs each range it reserves, and only the
/// last range of each tag, with its signature, is kept here to give back.
/// A `new_max` below the range's floor (the first ID of the previous range,
/// when the server confirmed this one follows it) is raised to the floor:
/// the IDs below it are skipped, never handed out twice.
#[derive(Clone)]
pub struct ServerStore {
    pub(crate) leases: Leases,
    pub(crate) segments: Segments,
    /// The last range reserved of each tag, as the server answered it.
    pub(crate) last_reserved: Arc<Mutex<HashMap<String, SegmentRange>>>,
    pub(crate) capabilities: Capabilities,
    pub(crate) segment_capabilities: SegmentCapabilities,
    url: String,
}

impl std::fmt::Debug for ServerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStore")
            .field("url", &redact_url(&self.url))
            .finish_non_exhaustive()
    }
}

/// How to reach the server: [`ServerStore::builder`].
#[derive(Clone)]
pub struct ServerStoreBuilder {
    url: String,
    bearer_token: Option<String>,
    connect_timeout: Duration,
    request_timeout: Duration,
    keep_alive_interval: Duration,
    keep_alive_timeout: Duration,
    tls_ca_pem: Option<Vec<u8>>,
    tls_identity_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for ServerStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStoreBuilder")
            .field("url", &redact_url(&self.url))
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "***"))
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("keep_alive_interval", &self.keep_alive_interval)
            .field("keep_alive_timeout", &self.keep_alive_timeout)
            .field("tls_ca", &self.tls_ca_pem.is_some())
            .field("tls_identity", &self.tls_identity_pem.is_some())
            .finish()
    }
}

impl ServerStore {
    /// A builder for the server at `url` (`http://host:port`, the server's
    /// `grpc_listen`; `https://` when it has `grpc_tls_cert`).
    pub fn builder(url: impl Into<String>) -> ServerStoreBuilder {
        ServerStoreBuilder {
            url: url.into(),
            bearer_token: None,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            keep_alive_interval: Duration::from_secs(5),
            keep_alive_timeout: Duration::from_secs(5),
            tls_ca_pem: None,
            tls_identity_pem: None,
        }
    }

    /// Connects to the server at `url` with the default timeouts and no
    /// token.
    ///
    /// # Errors
    /// As [`ServerStoreBuilder::connect`].
    pub async fn connect(url: impl Into<String>) -> Result<ServerStore, ConnectError> {
        ServerStore::builder(url).connect().await
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl ServerStoreBuilder {
    /// The bearer token the server asks for (its `auth_token`, or its
    /// `operator_token` for the operator's calls). Sent over plain
    /// `http://` to a host other than this one's loopback, it can be read
    /// on the way: connecting then logs a warning.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// The CA (PEM) that signed the server's certificate, for an
    /// `https://` URL; without it the web's public roots are trusted.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_ca_pem = Some(pem.into());
        self
    }

    /// A client certificate chain and its key (PEM), for a server that asks
    /// for one (`grpc_tls_client_ca`).
    pub fn client_identity_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls_identity_pem = Some((cert.into(), key.into()));
        self
    }

    /// How long connecting may take (default 3 s; more than zero, at most
    /// an hour).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one call may take before it is `Unavailable` (default 5 s;
    /// more than zero, at most an hour). The server is told too (the call's
    /// `grpc-timeout`), and gives up on it at the same time.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long the connection may stay silent before the client sends an
    /// HTTP/2 ping (default 5 s), idle or not.
    ///
    /// A connection whose ping is not answered within the
    /// [`keep_alive_timeout`](Self::keep_alive_timeout) is closed, and the
    /// next call opens a new one. Without that, a connection whose server
    /// vanished without a word (a crashed host, a load balancer or NAT that
    /// forgot it, a cable pulled) would keep every call on it waiting out
    /// its timeout until the kernel gives up on it, a quarter of an hour
    /// later, while a new connection would reach a server at once.
    pub fn keep_alive_interval(mut self, interval: Duration) -> Self {
        self.keep_alive_interval = interval;
        self
    }

    /// How long a ping may go unanswered before the connection is closed
    /// (default 5 s): see [`keep_alive_interval`](Self::keep_alive_interval).
    pub fn keep_alive_timeout(mut self, timeout: Duration) -> Self {
        self.keep_alive_timeout = timeout;
        self
    }

    /// The `authorization` value for `token`, marked sensitive: kept out
    /// of the transport's logs and `Debug` output.
    fn bearer_value(token: &str) -> Result<MetadataValue<Ascii>, ConnectError> {
        let mut value: MetadataValue<Ascii> = format!("Bearer {token}")
            .parse()
            .map_err(|_| ConnectError::InvalidConfig("the bearer token is not ASCII".into()))?;
        value.set_sensitive(true);
        Ok(value)
    }

    fn tls_config(&self) -> tonic::transport::ClientTlsConfig {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut config = ClientTlsConfig::new();
        config = match &self.tls_ca_pem {
            Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
            None => config.with_webpki_roots(),
        };
        if let Some((cert, key)) = &self.tls_identity_pem {
            config = config.identity(Identity::from_pem(cert, key));
        }
        config
    }

    /// Connects and reads what the store behind the server can do.
    ///
    /// # Errors
    /// [`ConnectError::InvalidConfig`] for a URL or token that cannot be
    /// used, or a timeout or keep-alive period of zero or over an hour;
    /// [`ConnectError::Unavailable`] when the server does not answer;
    /// [`ConnectError::Refused`] when it refuses the token or serves no
    /// workerid API.
    pub async fn connect(self) -> Result<ServerStore, ConnectError> {
        for (name, period) in [
            ("connect timeout", self.connect_timeout),
            ("request timeout", self.request_timeout),
            ("keep-alive interval", self.keep_alive_interval),
            ("keep-alive timeout", self.keep_alive_timeout),
        ] {
            if period.is_zero() || period > MAX_PERIOD {
                return Err(ConnectError::InvalidConfig(format!(
                    "the {name} must be longer than zero and at most an hour, not {period:?}"
                )));
            }
        }
        let mut endpoint = Endpoint::from_shared(self.url.clone())
            .map_err(|e| ConnectError::InvalidConfig(format!("{}: {e}", redact_url(&self.url))))?
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout)
            .http2_keep_alive_interval(self.keep_alive_interval)
            .keep_alive_timeout(self.keep_alive_timeout)
            .keep_alive_while_idle(true);
        if self.url.starts_with("https://") {
            endpoint = endpoint
                .tls_config(self.tls_config())
                .map_err(|e| ConnectError::InvalidConfig(format!("TLS: {e}")))?;
        } else if self.tls_ca_pem.is_some() || self.tls_identity_pem.is_some() {
            return Err(ConnectError::InvalidConfig(
                "TLS settings need an https:// URL".into(),
            ));
        }
        let token = match &self.bearer_token {
            Some(token) => Some(ServerStoreBuilder::bearer_value(token)?),
            None => None,
        };
        if token.is_some() && plain_to_another_host(&self.url) {
            tracing::warn!(
                url = %redact_url(&self.url),
                "the bearer token goes to another host over plain http://, readable on the way: \
                 use https:// (or a network that encrypts, such as a service mesh)"
            );
        }
        let unavailable = |reason: String| ConnectError::Unavailable {
            url: redact_url(&self.url),
            reason,
        };
        let failed = |status: Status| match status.code() {
            Code::Unauthenticated | Code::PermissionDenied | Code::Unimplemented => {
                ConnectError::Refused {
                    url: redact_url(&self.url),
                    reason: format!("{:?}: {}", status.code(), status.message()),
                }
            }
            _ => unavailable(status.message().to_owned()),
        };
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| unavailable(crate::errors::transport_reason(&e)))?;
        let bearer = Bearer {
            token,
            timeout: self.request_timeout,
        };
        let mut leases = LeasesClient::with_interceptor(channel.clone(), bearer.clone());
        let mut segments = SegmentsClient::with_interceptor(channel, bearer);
        let lease_caps = leases
            .capabilities(CapabilitiesRequest {})
            .await
            .map_err(failed)?
            .into_inner();
        let segment_caps = segments
            .capabilities(CapabilitiesRequest {})
            .await
            .map_err(failed)?
            .into_inner();
        Ok(ServerStore {
            leases,
            segments,
            last_reserved: Arc::default(),
            capabilities: Capabilities {
                min_ttl: Duration::from_millis(lease_caps.min_ttl_ms),
                ttl_granularity: Duration::from_millis(lease_caps.ttl_granularity_ms),
                max_worker_bits: u8::try_from(lease_caps.max_worker_bits).unwrap_or(22),
                durable: lease_caps.durable,
                expiry_lag: Duration::from_millis(lease_caps.expiry_lag_ms),
                quarantine: lease_caps.quarantine,
                list: lease_caps.list,
            },
            segment_capabilities: SegmentCapabilities {
                durable: segment_caps.durable,
                gapless: segment_caps.gapless,
                list: segment_caps.list,
                give_back: segment_caps.give_back,
            },
            url: self.url,
        })
    }
}

/// Whether `url` is plain `http://` to a host other than this one's
/// loopback addresses.
fn plain_to_another_host(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_over_plain_http_to_another_host_is_told_apart() {
        for (url, plain) in [
            ("http://10.0.0.5:8881", true),
            ("http://ids.example/", true),
            ("http://127.0.0.1:8881", false),
            ("http://localhost:8881", false),
            ("http://[::1]:8881", false),
            ("http://[2001:db8::1]:8881", true),
            ("https://ids.example", false),
        ] {
            assert_eq!(plain_to_another_host(url), plain, "{url}");
        }
    }

    #[test]
    fn the_token_never_shows() {
        let builder = ServerStore::builder("http://127.0.0.1:1").bearer_token("hunter2");
        assert!(!format!("{builder:?}").contains("hunter2"));
    }

    #[tokio::test]
    async fn the_password_of_the_url_never_shows() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let builder = ServerStore::builder(format!("http://user:pw4secret@127.0.0.1:{port}"))
            .connect_timeout(Duration::from_millis(500));
        let shown = format!("{builder:?}");
        assert!(!shown.contains("pw4secret"), "{shown}");
        assert!(shown.contains("user:***@"), "{shown}");
        let refused = builder.connect().await.unwrap_err();
        assert!(
            matches!(refused, ConnectError::Unavailable { .. }),
            "{refused}"
        );
        let shown = format!("{refused}\n{refused:?}");
        assert!(!shown.contains("pw4secret"), "{shown}");
        let invalid = ServerStore::connect("http://user:pw4secret@h:1/ x")
            .await
            .unwrap_err();
        assert!(
            matches!(invalid, ConnectError::InvalidConfig(_)),
            "{invalid}"
        );
        let shown = format!("{invalid}\n{invalid:?}");
        assert!(!shown.contains("pw4secret"), "{shown}");
    }

    #[tokio::test]
    async fn a_store_shows_its_url_without_the_password() {
        let store = ServerStore {
            leases: LeasesClient::with_interceptor(
                Endpoint::from_static("http://127.0.0.1:1").connect_lazy(),
                Bearer {
                    token: None,
                    timeout: Duration::from_secs(1),
                },
            ),
            segments: SegmentsClient::with_interceptor(
                Endpoint::from_static("http://127.0.0.1:1").connect_lazy(),
                Bearer {
                    token: None,
                    timeout: Duration::from_secs(1),
                },
            ),
            last_reserved: Arc::default(),
            capabilities: Capabilities {
                min_ttl: Duration::from_secs(1),
                ttl_granularity: Duration::from_millis(1),
                max_worker_bits: 22,
                durable: true,
                expiry_lag: Duration::ZERO,
                quarantine: false,
                list: true,
            },
            segment_capabilities: SegmentCapabilities {
                durable: true,
                gapless: false,
                list: true,
                give_back: false,
            },
            url: "http://user:pw4secret@127.0.0.1:1".into(),
        };
        let shown = format!("{store:?}");
        assert!(!shown.contains("pw4secret"), "{shown}");
    }

    #[tokio::test]
    async fn a_period_of_zero_or_over_an_hour_is_refused_before_connecting() {
        let builder = || ServerStore::builder("http://127.0.0.1:1");
        for (period, builder) in [
            ("keep-alive", builder().keep_alive_interval(Duration::ZERO)),
            ("keep-alive", builder().keep_alive_timeout(Duration::ZERO)),
            ("keep-alive", builder().keep_alive_interval(Duration::MAX)),
            ("connect", builder().connect_timeout(Duration::ZERO)),
            (
                "request",
                builder().request_timeout(Duration::from_secs(3601)),
            ),
        ] {
            let refused = builder.connect().await.unwrap_err();
            assert!(
                matches!(&refused, ConnectError::InvalidConfig(why) if why.contains(period)),
                "{refused}"
            );
        }
    }

    #[test]
    fn the_bearer_token_is_sensitive() {
        let token = ServerStoreBuilder::bearer_value("hunter2").unwrap();
        assert!(token.is_sensitive());
        assert!(!format!("{token:?}").contains("hunter2"));
    }

    #[tokio::test]
    async fn a_server_that_does_not_answer_is_unavailable() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let refused = ServerStore::builder(format!("http://127.0.0.1:{port}"))
            .connect_timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ConnectError::Unavailable { .. }),
            "{refused}"
        );
        let bad = ServerStore::connect("not a url").await.unwrap_err();
        assert!(matches!(bad, ConnectError::InvalidConfig(_)), "{bad}");
    }
}
