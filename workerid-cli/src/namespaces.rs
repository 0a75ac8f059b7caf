//! `namespaces`: every namespace of a store, its pool size and live count.

use serde::Serialize;
use workerid::LeaseStore;

use crate::args::NamespacesArgs;
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

/// `workerid namespaces`.
pub async fn namespaces(args: &NamespacesArgs, json: bool) -> Result<String, CliError> {
    let store = open(&args.store.store, true).await?;
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
        return Ok(format!("no namespace on {}\n", store.kind().name()));
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
