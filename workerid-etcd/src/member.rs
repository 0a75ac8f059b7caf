//! The client of one member: its HTTP/2 connection is set up here rather
//! than by etcd-client, which does not pass on every HTTP/2 setting.
//!
//! An overloaded member still answers requests the store gave up on (the
//! request timeout), and HTTP/2 as the `h2` crate implements it counts
//! such late answers, over the connection's whole life, against two limits
//! that close the connection with `GOAWAY(ENHANCE_YOUR_CALM)`, failing every
//! request and keep-alive stream on it when the member is slowest:
//!
//! - an answer to a stream it reset and no longer remembers (it remembers
//!   50, for a second) makes it reset that stream again by itself, and the
//!   1025th such reset closes the connection (`too_many_internal_resets`).
//!   That limit guards a client against a server that makes it spend work
//!   on resets; a member of one's own cluster is not such a server, so it
//!   is off here;
//! - a small DATA frame of an answer to a stream it still remembers uses up
//!   to 256 bytes of a budget of half the connection's flow-control window,
//!   and gives none of it back (`too_many_data_frames`). That budget cannot
//!   be turned off through tonic; the window here is the largest HTTP/2
//!   allows, so the budget (1 GiB) lasts millions of late answers where the
//!   default window's (2.5 MiB) lasts about ten thousand.

use std::time::Duration;

use etcd_client::{Channel, Client, ConnectOptions};
use tonic::transport::Endpoint;

use crate::connector::Connector;

/// How often an idle connection is pinged; a ping unanswered within the
/// request timeout closes it, so that a dead member is noticed.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(5);

/// HTTP/2's largest flow-control window (2^31 - 1 bytes).
const LARGEST_WINDOW: u32 = (1 << 31) - 1;

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
    /// `host:port`). With TLS it connects now, so that a refused
    /// certificate is an error that says so; without, on its first request.
    /// Either way it connects again after its connection is lost.
    ///
    /// # Errors
    /// `InvalidArgs` for a URL tonic refuses (the builder checks endpoints
    /// first, so not expected); with TLS, `EndpointError` for a refused
    /// handshake and an I/O error for a failed connection (see
    /// [`crate::tls::connect_now`]); and the authentication of the user
    /// (when one is set) failing.
    pub(crate) async fn client(&self, url: &str) -> Result<Client, etcd_client::Error> {
        let endpoint = endpoint(url)?
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout)
            .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(self.request_timeout)
            .keep_alive_while_idle(true)
            .http2_max_local_error_reset_streams(None)
            .initial_connection_window_size(LARGEST_WINDOW);
        let connector = Connector {
            user_timeout: self.request_timeout,
        };
        #[cfg(feature = "tls-rustls")]
        let channel = match &self.tls {
            Some(tls) => {
                let endpoint = endpoint.tls_config(tls.clone())?;
                crate::tls::connect_now(&endpoint, connector, url, self.connect_timeout).await?
            }
            None => endpoint.connect_with_connector_lazy(connector),
        };
        #[cfg(not(feature = "tls-rustls"))]
        let channel = endpoint.connect_with_connector_lazy(connector);
        Client::from_channel(Channel::Tonic(channel), Some(self.options.clone())).await
    }
}

/// The endpoint of `url`; a `host:port` is plain HTTP (the builder takes
/// TLS only from `https://`).
///
/// # Errors
/// `InvalidArgs` when tonic refuses the URL.
pub(crate) fn endpoint(url: &str) -> Result<Endpoint, etcd_client::Error> {
    let url = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    Endpoint::from_shared(url.clone())
        .map_err(|e| etcd_client::Error::InvalidArgs(format!("etcd endpoint {url:?}: {e}")))
}
