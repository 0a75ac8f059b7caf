//! The `workerid.v1.Leases` service: the lease contract of the server's
//! store, for programs that make snowflake IDs themselves. Every input is
//! checked before the store is called, as the library's `Allocator` does.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};
use workerid::{
    Holder, LeaseOptions, LeaseState, LeaseStore, Namespace, Token, WorkerId, MAX_LEASE_TIME_LIMIT,
};

use super::page::PageRequest;
use super::{observed, status};
use workerid_proto::v1::leases_server::Leases;
use workerid_proto::v1::{
    AcquireRequest, CapabilitiesRequest, ForceReleaseRequest, ForceReleased, Grant,
    LeaseCapabilities, LeaseInfo, ListNamespacesRequest, ListRequest, Listing, NamespaceInfo,
    NamespaceList, NamespaceRemoved, ReleaseRequest, Released, RemoveNamespaceRequest,
    RenewRequest, Renewed,
};

pub struct LeasesService {
    pub store: Arc<dyn LeaseStore>,
    /// ForceRelease and RemoveNamespace take the operator's token.
    pub tokens: super::Tokens,
    /// The server's own snowflake namespace, whose watermarks are checked.
    pub snowflake: Option<SnowflakeWatermarks>,
}

/// What a watermark may be in the server's own snowflake namespace: a time
/// its layout can carry, in Unix milliseconds. Anything else is a client's
/// mistake of unit (seconds, microseconds, nanoseconds) or a garbage value,
/// and stored it would either leave the holder's IDs unprotected (too low)
/// or take the worker ID out of the pool for good (past the layout's end).
pub struct SnowflakeWatermarks {
    namespace: String,
    layout: String,
    first_ms: u64,
    last_ms: u64,
}

impl SnowflakeWatermarks {
    /// The bounds of `layout`'s timestamps in `namespace`.
    pub fn new(namespace: &str, name: &str, layout: &workerid::snowflake::Layout) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        SnowflakeWatermarks {
            namespace: namespace.to_string(),
            layout: name.to_string(),
            first_ms: ms(layout.epoch()),
            last_ms: ms(layout.epoch().saturating_add(layout.span())),
        }
    }

    /// `Ok` for 0 (the stored watermark stays), any watermark of another
    /// namespace, and a time of the layout in this one.
    fn check(&self, namespace: &Namespace, watermark: u64) -> Result<(), Status> {
        if watermark == 0
            || namespace.as_str() != self.namespace
            || (self.first_ms..=self.last_ms).contains(&watermark)
        {
            return Ok(());
        }
        Err(status::invalid(
            "invalid_watermark",
            format!(
                "watermark {watermark} is not a time of this server's snowflake layout ({}): \
                 in namespace {:?} a watermark is Unix milliseconds from {} to {}",
                self.layout, self.namespace, self.first_ms, self.last_ms
            ),
        ))
    }
}

fn namespace(name: String) -> Result<Namespace, Status> {
    Namespace::new(name).map_err(|e| status::invalid("invalid_namespace", e.to_string()))
}

fn token(text: &str) -> Result<Token, Status> {
    Token::parse(text).map_err(|e| status::invalid("invalid_token", e.to_string()))
}

impl LeasesService {
    /// `ttl_ms` as a ttl this store keeps and the library allows (up to
    /// [`MAX_LEASE_TIME_LIMIT`], whatever an allocator's own limit).
    fn ttl(&self, ttl_ms: u64) -> Result<Duration, Status> {
        let ttl = Duration::from_millis(ttl_ms);
        LeaseOptions::new()
            .max_lease_time(MAX_LEASE_TIME_LIMIT)
            .check_ttl(ttl, &self.store.capabilities())
            .map_err(|e| status::invalid("invalid_ttl", e.to_string()))?;
        Ok(ttl)
    }

    /// A renewal's or release's watermark, checked in the server's own
    /// snowflake namespace (see [`SnowflakeWatermarks`]).
    fn check_watermark(&self, namespace: &Namespace, watermark: u64) -> Result<(), Status> {
        self.snowflake
            .as_ref()
            .map_or(Ok(()), |bounds| bounds.check(namespace, watermark))
    }
}

#[tonic::async_trait]
impl Leases for LeasesService {
    async fn acquire(&self, request: Request<AcquireRequest>) -> Result<Response<Grant>, Status> {
        let answer = async {
            let r = request.into_inner();
            let namespace = namespace(r.namespace)?;
            let token = token(&r.token)?;
            let holder = Holder::new(r.holder)
                .map_err(|e| status::invalid("invalid_holder", e.to_string()))?;
            let ttl = self.ttl(r.ttl_ms)?;
            let pool = LeaseOptions::new().max_worker_id(r.max_worker_id);
            pool.validate(&self.store.capabilities())
                .map_err(|e| status::invalid("invalid_worker_id", e.to_string()))?;
            let grant = self
                .store
                .acquire(&namespace, r.max_worker_id, &token, ttl, &holder)
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            Ok(Grant {
                worker_id: grant.id.get(),
                fence: grant.fence,
                previous_watermark: grant.previous_watermark,
            })
        };
        observed("/workerid.v1.Leases/Acquire", answer).await
    }

    async fn renew(&self, request: Request<RenewRequest>) -> Result<Response<Renewed>, Status> {
        let answer = async {
            let r = request.into_inner();
            let namespace = namespace(r.namespace)?;
            let token = token(&r.token)?;
            let ttl = self.ttl(r.ttl_ms)?;
            self.check_watermark(&namespace, r.watermark)?;
            let id = WorkerId::from(r.worker_id);
            self.store
                .renew(&namespace, id, &token, ttl, r.watermark)
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            Ok(Renewed {})
        };
        observed("/workerid.v1.Leases/Renew", answer).await
    }

    async fn release(
        &self,
        request: Request<ReleaseRequest>,
    ) -> Result<Response<Released>, Status> {
        let answer = async {
            let r = request.into_inner();
            let namespace = namespace(r.namespace)?;
            let token = token(&r.token)?;
            self.check_watermark(&namespace, r.watermark)?;
            let id = WorkerId::from(r.worker_id);
            self.store
                .release(&namespace, id, &token, r.watermark)
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            Ok(Released {})
        };
        observed("/workerid.v1.Leases/Release", answer).await
    }

    async fn list(&self, request: Request<ListRequest>) -> Result<Response<Listing>, Status> {
        let answer = async {
            let r = request.into_inner();
            let namespace = namespace(r.namespace)?;
            let page = PageRequest::new(r.page_size, &r.page_token, |t| t.parse::<u32>().ok())?;
            let listing = self
                .store
                .list(&namespace)
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            let (leases, next_page_token) = page.take(listing.leases, |l| l.id.get());
            Ok(Listing {
                known: listing.max_worker_id.is_some(),
                max_worker_id: listing.max_worker_id.unwrap_or(0),
                next_page_token,
                leases: leases
                    .into_iter()
                    .map(|l| LeaseInfo {
                        worker_id: l.id.get(),
                        state: l.state.name().into(),
                        remaining_ms: match l.state {
                            LeaseState::Live { remaining } => {
                                u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX)
                            }
                            _ => 0,
                        },
                        fence: l.fence,
                        watermark: l.watermark,
                        holder: l.holder.as_str().into(),
                    })
                    .collect(),
            })
        };
        observed("/workerid.v1.Leases/List", answer).await
    }

    async fn force_release(
        &self,
        request: Request<ForceReleaseRequest>,
    ) -> Result<Response<ForceReleased>, Status> {
        let answer = async {
            self.tokens.operator(&request)?;
            let r = request.into_inner();
            let namespace = namespace(r.namespace)?;
            // The store contract leaves the pool check to the caller.
            let listing = self
                .store
                .list(&namespace)
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            if let Some(max_worker_id) = listing.max_worker_id {
                if r.worker_id > max_worker_id {
                    let e = workerid::Error::InvalidWorkerId {
                        id: u64::from(r.worker_id),
                        max_worker_id,
                    };
                    return Err(status::of_lease_error(&e));
                }
            }
            let released = self
                .store
                .force_release(&namespace, WorkerId::from(r.worker_id))
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            Ok(ForceReleased { released })
        };
        observed("/workerid.v1.Leases/ForceRelease", answer).await
    }

    async fn list_namespaces(
        &self,
        request: Request<ListNamespacesRequest>,
    ) -> Result<Response<NamespaceList>, Status> {
        let answer = async {
            let r = request.into_inner();
            let page = PageRequest::new(r.page_size, &r.page_token, |t| {
                Namespace::new(t).ok().map(|_| t.to_owned())
            })?;
            let namespaces = self
                .store
                .list_namespaces()
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            let (namespaces, next_page_token) =
                page.take(namespaces, |n| n.namespace.as_str().to_owned());
            Ok(NamespaceList {
                namespaces: namespaces
                    .into_iter()
                    .map(|n| NamespaceInfo {
                        namespace: n.namespace.as_str().into(),
                        max_worker_id: n.max_worker_id,
                        live: n.live,
                    })
                    .collect(),
                next_page_token,
            })
        };
        observed("/workerid.v1.Leases/ListNamespaces", answer).await
    }

    async fn remove_namespace(
        &self,
        request: Request<RemoveNamespaceRequest>,
    ) -> Result<Response<NamespaceRemoved>, Status> {
        let answer = async {
            self.tokens.operator(&request)?;
            let namespace = namespace(request.into_inner().namespace)?;
            let removed = self
                .store
                .remove_namespace(&namespace)
                .await
                .map_err(|e| status::of_lease_error(&e))?;
            Ok(NamespaceRemoved { removed })
        };
        observed("/workerid.v1.Leases/RemoveNamespace", answer).await
    }

    async fn capabilities(
        &self,
        _request: Request<CapabilitiesRequest>,
    ) -> Result<Response<LeaseCapabilities>, Status> {
        let caps = self.store.capabilities();
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let answer = LeaseCapabilities {
            min_ttl_ms: ms(caps.min_ttl),
            ttl_granularity_ms: ms(caps.ttl_granularity),
            max_worker_bits: u32::from(caps.max_worker_bits),
            durable: caps.durable,
            expiry_lag_ms: ms(caps.expiry_lag),
            quarantine: caps.quarantine,
            list: caps.list,
        };
        observed(
            "/workerid.v1.Leases/Capabilities",
            std::future::ready(Ok(answer)),
        )
        .await
    }
}
