//! The client of one member: its HTTP/2 connection is set up here rather
//! than by etcd-client, which does not pass on every HTTP/2 setting.
//!
//! The setting that matters: HTTP/2 (the `h2` crate) closes a connection
//! with `GOAWAY(ENHANCE_YOUR_CALM, "too_many_internal_resets")` once it has
//! reset 1024 streams by itself over the connection's whole life, and an
//! answer that arrives for a stream it reset and no longer remembers (it
//! remembers 50, for a second) is one of those. An overloaded member answers
//! requests the store gave up on (the request timeout), so its connection
//! would be closed, with every request and keep-alive stream on it, when
//! the member is slowest, and on a long-lived connection in time anyway.
//! That limit guards against a peer that makes one spend work on resets; a
//! member of one's own cluster is not such a peer, so it is off here.

use std::time::Duration;

use etcd_client::{Channel, Client, ConnectOptions};
use tonic::transport::Endpoint;

/// How often an idle connection is pinged; an unanswered ping (within the
/// request timeout) closes it, so that a dead member is noticed.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(5);

/// How the store connects to each member.
#[derive(Clone)]
pub(crate) struct MemberSettings {
    /// The user and password, and the "require leader" mark on requests.
    pub options: ConnectOptions,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    #[cfg(feature = "tls-rustls")]
    pub tls: Option<etcd_client::TlsOptions>,
}

impl MemberSettings {
    /// A client of the member at `url` (`http://`, `https://` or
    /// `host:port`); it connects on its first request, and again after its
    /// connection is lost.
    ///
    /// # Errors
    /// A URL tonic refuses, TLS settings it refuses, and the authentication
    /// of the user (when one is set) failing.
    pub async fn client(&self, url: &str) -> Result<Client, etcd_client::Error> {
        // A `host:port` is plain: the builder takes TLS only from `https://`.
        let url = if url.contains("://") {
            url.to_string()
        } else {
            format!("http://{url}")
        };
        #[allow(unused_mut)]
        let mut endpoint = Endpoint::from_shared(url)?
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout)
            .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(self.request_timeout)
            .keep_alive_while_idle(true)
            .http2_max_local_error_reset_streams(None);
        #[cfg(feature = "tls-rustls")]
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.clone())?;
        }
        let channel = Channel::Tonic(endpoint.connect_lazy());
        Client::from_channel(channel, Some(self.options.clone())).await
    }
}
