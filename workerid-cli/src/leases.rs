//! `leases` and `release`: an operator's view of a namespace, and a forced
//! release of a stuck worker ID.

use crate::error::CliError;
use crate::store::open;
use serde::Serialize;
use workerid::StoreKind;

use workerid::{Allocator, LeaseInfo, LeaseOptions, LeaseState, Listing, Namespace};

use crate::args::{LeasesArgs, ReleaseArgs, Target};
use crate::render::{table, time_left, watermark_date};

/// One worker ID, as `--json` prints it.
#[derive(Debug, Serialize)]
struct LeaseJson {
    id: u32,
    state: &'static str,
    fence: u64,
    /// Time left (store clock), for a live lease.
    remaining_ms: Option<u64>,
    watermark: u64,
    watermark_utc: Option<String>,
    /// Who the latest grant went to.
    holder: String,
}

impl From<&LeaseInfo> for LeaseJson {
    fn from(l: &LeaseInfo) -> Self {
        LeaseJson {
            id: l.id.get(),
            state: l.state.name(),
            fence: l.fence,
            remaining_ms: match l.state {
                LeaseState::Live { remaining } => {
                    Some(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX))
                }
                _ => None,
            },
            watermark: l.watermark,
            watermark_utc: watermark_date(l.watermark),
            holder: l.holder.to_string(),
        }
    }
}

#[derive(Debug, Serialize)]
struct ListingJson {
    store: &'static str,
    namespace: String,
    max_worker_id: u32,
    live: usize,
    expired: usize,
    free: usize,
    never_granted: u64,
    leases: Vec<LeaseJson>,
}

/// An allocator on the namespace, after checking that the store can list and
/// that the namespace exists; with its listing.
async fn namespace(
    target: Target<'_>,
    namespace: &str,
) -> Result<(Allocator, Listing, StoreKind), CliError> {
    Namespace::new(namespace)?; // a bad name is refused before any I/O
    let stores = open(target, true).await?;
    let scheme = stores.kind();
    // The pool size comes from the store; 10 bits only to build the allocator.
    let allocator = Allocator::from_arc(stores.lease_store(), namespace, LeaseOptions::new())?;
    if !allocator.store().capabilities().list {
        return Err(CliError::Unsupported {
            store: scheme.name(),
            operation: "list leases or force a release",
        });
    }
    let listing = allocator.list().await?;
    let Some(max) = listing.max_worker_id else {
        return Err(CliError::UnknownNamespace(namespace.to_string()));
    };
    let options = LeaseOptions::new().max_worker_id(max);
    let allocator = Allocator::from_arc(allocator.store().clone(), namespace, options)?;
    Ok((allocator, listing, scheme))
}

fn describe(l: &LeaseInfo) -> Vec<String> {
    let left = match l.state {
        LeaseState::Live { remaining } => time_left(remaining),
        _ => "-".into(),
    };
    let watermark = match (l.watermark, watermark_date(l.watermark)) {
        (0, _) => "-".to_string(),
        (_, Some(date)) => date,
        (w, None) => w.to_string(),
    };
    vec![
        l.id.to_string(),
        l.state.name().to_string(),
        l.fence.to_string(),
        left,
        watermark,
        l.holder.to_string(),
    ]
}

/// `workerid leases`.
pub async fn leases(args: &LeasesArgs, json: bool) -> Result<String, CliError> {
    let (allocator, listing, scheme) = namespace(args.store.target(), &args.namespace).await?;
    let max = allocator.max_worker_id();
    let live = listing.live().count();
    let count = |state: &str| {
        listing
            .leases
            .iter()
            .filter(|l| l.state.name() == state)
            .count()
    };
    let never = u64::from(max) + 1 - listing.leases.len() as u64;
    if json {
        let out = ListingJson {
            store: scheme.name(),
            namespace: args.namespace.clone(),
            max_worker_id: max,
            live,
            expired: count("expired"),
            free: count("free"),
            never_granted: never,
            leases: listing.leases.iter().map(LeaseJson::from).collect(),
        };
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    let mut out = format!(
        "namespace {} on {}: worker IDs 0..={max}; {live} live, {} expired, {} free, {never} never granted\n",
        args.namespace,
        scheme.name(),
        count("expired"),
        count("free"),
    );
    if listing.leases.is_empty() {
        return Ok(out);
    }
    let header = [
        "ID",
        "STATE",
        "FENCE",
        "TIME LEFT",
        "WATERMARK (UTC)",
        "HOLDER",
    ];
    let mut rows = vec![header.iter().map(|h| h.to_string()).collect()];
    rows.extend(listing.leases.iter().map(describe));
    out.push_str(&table(&rows));
    Ok(out)
}

#[derive(Debug, Serialize)]
struct ReleaseJson {
    namespace: String,
    id: u64,
    released: bool,
    /// The state before: live, expired, free, or never granted.
    was: &'static str,
    fence: Option<u64>,
    watermark: Option<u64>,
    /// Who held it (its latest grant's holder label).
    holder: Option<String>,
}

/// `workerid release`.
pub async fn release(args: &ReleaseArgs, json: bool) -> Result<String, CliError> {
    if !args.force {
        return Err(CliError::Refused(format!(
            "refusing to release worker ID {} of namespace {:?} without --force: a live \
             holder would lose its lease (its next renewal fails with NotAssigned). Check it \
             with `workerid leases --namespace {}` first; nothing was changed",
            args.id, args.namespace, args.namespace
        )));
    }
    let (allocator, listing, _) = namespace(args.store.target(), &args.namespace).await?;
    let before = u32::try_from(args.id)
        .ok()
        .and_then(|id| listing.get(id.into()).cloned());
    if let Some(expected) = args.fence {
        let fence = before.as_ref().map(|l| l.fence);
        if fence != Some(expected) {
            return Err(CliError::Refused(format!(
                "worker ID {} of namespace {:?} has fence {} now, not {expected}: it was \
                 granted again since (or never); nothing was changed",
                args.id,
                args.namespace,
                fence.map_or_else(|| "none".to_string(), |f| f.to_string())
            )));
        }
    }
    let released = allocator.force_release(args.id).await?;
    let was = before.as_ref().map_or("never granted", |l| l.state.name());
    if json {
        let out = ReleaseJson {
            namespace: args.namespace.clone(),
            id: args.id,
            released,
            was,
            fence: before.as_ref().map(|l| l.fence),
            watermark: before.as_ref().map(|l| l.watermark),
            holder: before.as_ref().map(|l| l.holder.to_string()),
        };
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    let (id, ns) = (args.id, &args.namespace);
    Ok(match before {
        Some(l) if released => format!(
            "released worker ID {id} of namespace {ns} (was live, held by {}, fence {}); its \
             watermark {} is kept and the next grant gets a fence above {}\n",
            l.holder,
            l.fence,
            watermark_date(l.watermark).unwrap_or_else(|| l.watermark.to_string()),
            l.fence
        ),
        _ if released => format!("released worker ID {id} of namespace {ns}\n"),
        _ => format!(
            "worker ID {id} of namespace {ns} was not held by a live lease ({was}): nothing to release\n"
        ),
    })
}
