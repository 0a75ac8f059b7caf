//! Counters for `GET /metrics` (Prometheus text format).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use workerid::segment::{Error, Range, Result, SegmentStore, Tag, TagInfo};

use crate::supervisor::Snowflake;

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    pub segment_ids: AtomicU64,
    pub snowflake_ids: AtomicU64,
    pub request_errors: AtomicU64,
    pub segment_loads: AtomicU64,
    pub store_errors: AtomicU64,
    pub tag_lists: AtomicU64,
    pub fast_path_requests: AtomicU64,
}

/// Values read at render time.
#[derive(Debug, Default)]
pub struct Gauges {
    /// From [`SegmentAllocator::stalls`](workerid::segment::SegmentAllocator::stalls).
    pub stalls: u64,
    pub tags_known: usize,
    pub tags_missing: usize,
    pub tags_in_memory: usize,
}

impl Metrics {
    /// The Prometheus text.
    pub fn render(&self, snowflake: Option<&Snowflake>, gauges: &Gauges) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "# HELP workerid_ids_served_total IDs served.\n\
             # TYPE workerid_ids_served_total counter\n\
             workerid_ids_served_total{{kind=\"segment\"}} {}\n\
             workerid_ids_served_total{{kind=\"snowflake\"}} {}\n\
             # HELP workerid_request_errors_total Requests answered with an error.\n\
             # TYPE workerid_request_errors_total counter\n\
             workerid_request_errors_total {}\n\
             # HELP workerid_segment_loads_total Segments reserved from the store.\n\
             # TYPE workerid_segment_loads_total counter\n\
             workerid_segment_loads_total {}\n\
             # HELP workerid_segment_stalls_total Calls that found both segment buffers empty and waited for the store.\n\
             # TYPE workerid_segment_stalls_total counter\n\
             workerid_segment_stalls_total {}\n\
             # HELP workerid_store_errors_total Store calls that failed to answer (not unknown tags).\n\
             # TYPE workerid_store_errors_total counter\n\
             workerid_store_errors_total {}\n\
             {}\
             # HELP workerid_tag_lists_total Reads of the whole tag list from the store.\n\
             # TYPE workerid_tag_lists_total counter\n\
             workerid_tag_lists_total {}\n\
             # HELP workerid_tags_known Tags in the server's view of the store.\n\
             # TYPE workerid_tags_known gauge\n\
             workerid_tags_known {}\n\
             # HELP workerid_tags_found_missing Tags of the view the store no longer knows.\n\
             # TYPE workerid_tags_found_missing gauge\n\
             workerid_tags_found_missing {}\n\
             # HELP workerid_tags_in_memory Tags with allocator state in memory.\n\
             # TYPE workerid_tags_in_memory gauge\n\
             workerid_tags_in_memory {}\n\
             # HELP workerid_fast_path_requests_total Requests answered on the /alloc fast path.\n\
             # TYPE workerid_fast_path_requests_total counter\n\
             workerid_fast_path_requests_total {}\n",
            get(&self.segment_ids),
            get(&self.snowflake_ids),
            get(&self.request_errors),
            get(&self.segment_loads),
            gauges.stalls,
            get(&self.store_errors),
            snowflake.map(lease_metrics).unwrap_or_default(),
            get(&self.tag_lists),
            gauges.tags_known,
            gauges.tags_missing,
            gauges.tags_in_memory,
            get(&self.fast_path_requests),
        )
    }
}

/// A segment store that bounds every call by a timeout and counts
/// reservations and errors: a hung store fails a call with `Unavailable`
/// rather than holding a tag's lock (and shutdown) for good.
#[derive(Debug)]
pub struct Counted {
    pub inner: Arc<dyn SegmentStore>,
    pub metrics: Arc<Metrics>,
    pub timeout: Duration,
}

/// The snowflake worker's metrics: only when snowflake IDs are served, so
/// that an alert on `workerid_lease_ready == 0` never fires for a server
/// that has no lease to hold.
fn lease_metrics(s: &Snowflake) -> String {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let id = s.worker_id();
    // Namespaces and holder labels are [A-Za-z0-9._:/-]: nothing to escape.
    let info = id.map_or_else(String::new, |id| {
        format!(
            "workerid_lease_info{{namespace=\"{}\",holder=\"{}\",worker_id=\"{id}\"}} 1\n",
            s.namespace(),
            s.holder()
        )
    });
    format!(
        "# HELP workerid_lease_ready Whether the snowflake worker holds a live lease.\n\
         # TYPE workerid_lease_ready gauge\n\
         workerid_lease_ready {}\n\
         # HELP workerid_lease_info The worker ID held, its namespace and holder label (only while held).\n\
         # TYPE workerid_lease_info gauge\n\
         {info}\
         # HELP workerid_lease_joins_total Snowflake workers that joined (a first start and every rejoin).\n\
         # TYPE workerid_lease_joins_total counter\n\
         workerid_lease_joins_total {}\n\
         # HELP workerid_lease_losses_total Snowflake workers that lost their lease.\n\
         # TYPE workerid_lease_losses_total counter\n\
         workerid_lease_losses_total {}\n\
         # HELP workerid_lease_join_failures_total Snowflake join attempts that failed.\n\
         # TYPE workerid_lease_join_failures_total counter\n\
         workerid_lease_join_failures_total {}\n",
        u8::from(id.is_some()),
        get(&s.joins),
        get(&s.losses),
        get(&s.join_failures),
    )
}

impl Counted {
    async fn call<T>(&self, request: impl Future<Output = Result<T>>) -> Result<T> {
        let result = match tokio::time::timeout(self.timeout, request).await {
            Ok(answer) => answer,
            Err(_) => Err(Error::unavailable(
                "segment store",
                format!("no answer within {:?}", self.timeout),
            )),
        };
        // An unknown tag or an exhausted one is the caller's mistake, not
        // the store's: only failures to answer count.
        if matches!(result, Err(Error::Unavailable { .. })) {
            self.metrics.store_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

#[async_trait::async_trait]
impl SegmentStore for Counted {
    fn segment_capabilities(&self) -> workerid::segment::SegmentCapabilities {
        self.inner.segment_capabilities()
    }
    async fn create_tag(&self, tag: &Tag, first_id: u64, step: u64) -> Result<bool> {
        self.call(self.inner.create_tag(tag, first_id, step)).await
    }
    async fn reserve(&self, tag: &Tag, step: Option<u64>) -> Result<Range> {
        self.metrics.segment_loads.fetch_add(1, Ordering::Relaxed);
        self.call(self.inner.reserve(tag, step)).await
    }
    async fn give_back(&self, tag: &Tag, reserved: Range, new_max: u64) -> Result<bool> {
        self.call(self.inner.give_back(tag, reserved, new_max))
            .await
    }
    async fn list_tags(&self) -> Result<Vec<TagInfo>> {
        self.metrics.tag_lists.fetch_add(1, Ordering::Relaxed);
        self.call(self.inner.list_tags()).await
    }
}
