//! [`LeaseStore`] over the server's `workerid.v1.Leases`.

use std::time::Duration;

use async_trait::async_trait;
use workerid_core::{
    Capabilities, Grant, Holder, LeaseInfo, LeaseState, LeaseStore, Listing, Namespace,
    NamespaceInfo, Result, Token, WorkerId,
};
use workerid_proto::v1::{
    AcquireRequest, ForceReleaseRequest, ListNamespacesRequest, ListRequest, ReleaseRequest,
    RemoveNamespaceRequest, RenewRequest,
};

use crate::errors::{lease_error, About};
use crate::pages::{every_page, Page};
use crate::ServerStore;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn nonsense(what: impl std::fmt::Display) -> workerid_core::Error {
    workerid_core::Error::unavailable(
        "workerid-server",
        format!("the server answered nonsense: {what}"),
    )
}

#[async_trait]
impl LeaseStore for ServerStore {
    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    async fn acquire(
        &self,
        namespace: &Namespace,
        max_worker_id: u32,
        token: &Token,
        ttl: Duration,
        holder: &Holder,
    ) -> Result<Grant> {
        let request = AcquireRequest {
            namespace: namespace.as_str().into(),
            max_worker_id,
            token: token.to_string(),
            ttl_ms: ms(ttl),
            holder: holder.as_str().into(),
        };
        let about = About {
            namespace: namespace.as_str(),
            max_worker_id,
            operation: "acquire",
            ..About::default()
        };
        let grant = self
            .leases
            .clone()
            .acquire(request)
            .await
            .map_err(|s| lease_error(&s, &about))?
            .into_inner();
        Ok(Grant {
            id: WorkerId::from(grant.worker_id),
            fence: grant.fence,
            previous_watermark: grant.previous_watermark,
        })
    }

    async fn renew(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        ttl: Duration,
        watermark: u64,
    ) -> Result<()> {
        let request = RenewRequest {
            namespace: namespace.as_str().into(),
            worker_id: id.get(),
            token: token.to_string(),
            ttl_ms: ms(ttl),
            watermark,
        };
        let about = About {
            namespace: namespace.as_str(),
            id: Some(id),
            operation: "renew",
            ..About::default()
        };
        self.leases
            .clone()
            .renew(request)
            .await
            .map_err(|s| lease_error(&s, &about))?;
        Ok(())
    }

    async fn release(
        &self,
        namespace: &Namespace,
        id: WorkerId,
        token: &Token,
        watermark: u64,
    ) -> Result<()> {
        let request = ReleaseRequest {
            namespace: namespace.as_str().into(),
            worker_id: id.get(),
            token: token.to_string(),
            watermark,
        };
        let about = About {
            namespace: namespace.as_str(),
            id: Some(id),
            operation: "release",
            ..About::default()
        };
        self.leases
            .clone()
            .release(request)
            .await
            .map_err(|s| lease_error(&s, &about))?;
        Ok(())
    }

    async fn list(&self, namespace: &Namespace) -> Result<Listing> {
        let about = About {
            namespace: namespace.as_str(),
            operation: "list",
            ..About::default()
        };
        // Each page says whether the namespace is known, and its pool; the
        // last page's answer stands.
        let (leases, pool) = every_page(|page_token| {
            let mut client = self.leases.clone();
            let request = ListRequest {
                namespace: namespace.as_str().into(),
                page_size: 0,
                page_token,
            };
            async move {
                let page = client.list(request).await?.into_inner();
                Ok(Page {
                    about: page.known.then_some(page.max_worker_id),
                    entries: page.leases,
                    next: page.next_page_token,
                })
            }
        })
        .await
        .map_err(|s| lease_error(&s, &about))?;
        let leases = leases
            .into_iter()
            .map(|l| {
                let state = match l.state.as_str() {
                    "live" => LeaseState::Live {
                        remaining: Duration::from_millis(l.remaining_ms.max(1)),
                    },
                    "expired" => LeaseState::Expired,
                    "free" => LeaseState::Free,
                    other => return Err(nonsense(format!("lease state {other:?}"))),
                };
                Ok(LeaseInfo {
                    id: WorkerId::from(l.worker_id),
                    state,
                    fence: l.fence,
                    watermark: l.watermark,
                    holder: Holder::new(l.holder).map_err(nonsense)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Listing {
            max_worker_id: pool,
            leases,
        })
    }

    async fn force_release(&self, namespace: &Namespace, id: WorkerId) -> Result<bool> {
        let about = About {
            namespace: namespace.as_str(),
            id: Some(id),
            operation: "force_release",
            ..About::default()
        };
        let answer = self
            .leases
            .clone()
            .force_release(ForceReleaseRequest {
                namespace: namespace.as_str().into(),
                worker_id: id.get(),
            })
            .await
            .map_err(|s| lease_error(&s, &about))?;
        Ok(answer.into_inner().released)
    }

    async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>> {
        let about = About {
            operation: "list_namespaces",
            ..About::default()
        };
        let (namespaces, ()) = every_page(|page_token| {
            let mut client = self.leases.clone();
            async move {
                let page = client
                    .list_namespaces(ListNamespacesRequest {
                        page_size: 0,
                        page_token,
                    })
                    .await?
                    .into_inner();
                Ok(Page {
                    entries: page.namespaces,
                    next: page.next_page_token,
                    about: (),
                })
            }
        })
        .await
        .map_err(|s| lease_error(&s, &about))?;
        namespaces
            .into_iter()
            .map(|n| {
                Ok(NamespaceInfo {
                    namespace: Namespace::new(n.namespace).map_err(nonsense)?,
                    max_worker_id: n.max_worker_id,
                    live: n.live,
                })
            })
            .collect()
    }

    async fn remove_namespace(&self, namespace: &Namespace) -> Result<bool> {
        let about = About {
            namespace: namespace.as_str(),
            operation: "remove_namespace",
            ..About::default()
        };
        let answer = self
            .leases
            .clone()
            .remove_namespace(RemoveNamespaceRequest {
                namespace: namespace.as_str().into(),
            })
            .await
            .map_err(|s| lease_error(&s, &about))?;
        Ok(answer.into_inner().removed)
    }
}
