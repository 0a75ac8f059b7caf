//! `namespaces`: every namespace of a store, its pool size and live count;
//! `namespaces remove`: forgets one that no live lease uses.

use serde::Serialize;
use workerid::{Error, LeaseStore, Namespace};

use crate::args::{NamespacesArgs, NamespacesCommand, Target};
use crate::error::CliError;
use crate::render::table;
use crate::store::open;

/// One namespace, as `--json` prints it.
#[derive(Debug, Serialize)]
struct NamespaceJson {
    namespace: String,
    max_worker_id: u32,
    live: u32,
}

#[derive(Debug, Serialize)]
struct RemovedJson {
    namespace: String,
    removed: bool,
}

/// `workerid namespaces [remove ...]`.
pub async fn namespaces(args: &NamespacesArgs, json: bool) -> Result<String, CliError> {
    let target = args.store.target("namespaces")?;
    match &args.action {
        None => list(target, json).await,
        Some(NamespacesCommand::Remove { namespace, force }) => {
            remove(target, namespace, *force, json).await
        }
    }
}

/// Removes `name`: refused without `force` before the store is opened, as
/// a forced release is.
async fn remove(
    target: Target<'_>,
    name: &str,
    force: bool,
    json: bool,
) -> Result<String, CliError> {
    let namespace = Namespace::new(name)?;
    if !force {
        return Err(CliError::Refused(format!(
            "removing namespace {name} forgets the fences and watermarks that keep its worker \
             IDs' next holders above the IDs issued before: add --force to remove it"
        )));
    }
    let store = open(target, false).await?;
    if !store.capabilities().list {
        return Err(CliError::Unsupported {
            store: store.kind().name(),
            operation: "remove a namespace",
        });
    }
    match store.remove_namespace(&namespace).await {
        Ok(true) if json => Ok(serde_json::to_string_pretty(&RemovedJson {
            namespace: name.into(),
            removed: true,
        })? + "\n"),
        Ok(true) => Ok(format!(
            "removed namespace {name} from {}\n",
            store.kind().name()
        )),
        Ok(false) => Err(CliError::UnknownNamespace(name.into())),
        Err(Error::NamespaceInUse { live, .. }) => Err(CliError::Refused(format!(
            "namespace {name} has {live} live lease(s): stop their processes (or let the \
             leases expire) first; nothing was removed"
        ))),
        Err(e) => Err(e.into()),
    }
}

async fn list(target: Target<'_>, json: bool) -> Result<String, CliError> {
    let store = open(target, true).await?;
    if !store.capabilities().list {
        return Err(CliError::Unsupported {
            store: store.kind().name(),
            operation: "list namespaces",
        });
    }
    let all = store.list_namespaces().await?;
    if json {
        let out: Vec<NamespaceJson> = all
            .iter()
            .map(|n| NamespaceJson {
                namespace: n.namespace.to_string(),
                max_worker_id: n.max_worker_id,
                live: n.live,
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    if all.is_empty() {
        // The URL names the database or prefix: a typo there reads as empty.
        return Ok(format!("no namespace on {}\n", store.url()));
    }
    let mut rows = vec![vec![
        "NAMESPACE".to_string(),
        "WORKER IDS".into(),
        "LIVE".into(),
    ]];
    rows.extend(all.iter().map(|n| {
        vec![
            n.namespace.to_string(),
            format!("0..={}", n.max_worker_id),
            n.live.to_string(),
        ]
    }));
    Ok(table(&rows))
}
