//! The `workerid.v1.Ids` service: the HTTP API's IDs over gRPC, from the
//! same tags and buffers.

use std::ops::Range;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use tokio::sync::{mpsc, watch};
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use workerid::snowflake::FieldOrder;

use super::{observed, status, SnowflakeLayout as SnowflakeLayoutSetting};
use crate::routes::{App, Failure};
use workerid_proto::v1::ids_server::Ids;
use workerid_proto::v1::{
    DecodeRequest, DecodedId, IdBatch, IdRange, LayoutRequest, NextIdsRequest,
    NextSnowflakesRequest, SnowflakeLayout, StreamIdsRequest,
};

/// Batches a stream keeps ready ahead of its client.
const STREAM_AHEAD: usize = 2;

pub struct IdsService {
    pub app: Arc<App>,
    /// The snowflake IDs' layout, for `Decode` and `Layout`.
    pub layout: super::SnowflakeLayout,
    /// Turns true when the server shuts down: streams end.
    pub shutdown: watch::Receiver<bool>,
}

impl IdsService {
    /// `count`, unless it is out of `1..=max_batch`.
    fn count(&self, count: u64) -> Result<u64, Status> {
        if (1..=self.app.max_batch).contains(&count) {
            Ok(count)
        } else {
            Err(status::invalid(
                "invalid_count",
                format!(
                    "count must be a whole number from 1 to {}",
                    self.app.max_batch
                ),
            ))
        }
    }

    /// A batch of `count` IDs: a segment tag's, or snowflake IDs for `None`.
    async fn batch(&self, tag: Option<&str>, count: u64) -> Result<IdBatch, Status> {
        let runs = match tag {
            Some(tag) => self
                .app
                .next_segment_ids(tag, count)
                .await
                .map_err(Failure::from),
            None => self.app.next_snowflakes(count),
        };
        match runs {
            Ok(runs) => Ok(id_batch(&runs)),
            Err(e) => {
                self.app.metrics.request_error(crate::routes::public(&e).0);
                Err(status::of_failure(&e))
            }
        }
    }
}

/// Runs of consecutive IDs as the API's ranges (both ends included).
fn id_batch(runs: &[Range<u64>]) -> IdBatch {
    IdBatch {
        ranges: runs
            .iter()
            .map(|r| IdRange {
                first: r.start,
                last: r.end - 1,
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl Ids for IdsService {
    async fn next_ids(
        &self,
        request: Request<NextIdsRequest>,
    ) -> Result<Response<IdBatch>, Status> {
        let answer = async {
            let request = request.into_inner();
            let count = self.count(request.count)?;
            self.batch(Some(&request.tag), count).await
        };
        observed("/workerid.v1.Ids/NextIds", answer).await
    }

    async fn next_snowflakes(
        &self,
        request: Request<NextSnowflakesRequest>,
    ) -> Result<Response<IdBatch>, Status> {
        let answer = async {
            let count = self.count(request.into_inner().count)?;
            self.batch(None, count).await
        };
        observed("/workerid.v1.Ids/NextSnowflakes", answer).await
    }

    type StreamIdsStream = ReceiverStream<Result<IdBatch, Status>>;

    async fn stream_ids(
        &self,
        request: Request<StreamIdsRequest>,
    ) -> Result<Response<Self::StreamIdsStream>, Status> {
        let request = request.into_inner();
        let count = match self.count(request.count) {
            Ok(count) => count,
            Err(refused) => {
                return observed(
                    "/workerid.v1.Ids/StreamIds",
                    std::future::ready(Err(refused)),
                )
                .await
            }
        };
        let (tx, rx) = mpsc::channel(STREAM_AHEAD);
        let service = IdsService {
            app: self.app.clone(),
            layout: self.layout.clone(),
            shutdown: self.shutdown.clone(),
        };
        let tag = (!request.tag.is_empty()).then_some(request.tag);
        let batches = match request.batches {
            0 => u64::MAX,
            n => n,
        };
        tokio::spawn(async move {
            let mut shutdown = service.shutdown.clone();
            for _ in 0..batches {
                if *shutdown.borrow_and_update() {
                    let _ = tx
                        .send(Err(status::status(
                            tonic::Code::Unavailable,
                            "shutting_down",
                            "shutting down",
                        )))
                        .await;
                    return;
                }
                let batch = service.batch(tag.as_deref(), count).await;
                let failed = batch.is_err();
                // A client that went away ends the stream, and so does a
                // shutdown while a client that stopped reading holds the
                // send: the server would otherwise wait on it for good (the
                // batch is skipped, never handed out again).
                let sent = tokio::select! {
                    sent = tx.send(batch) => sent.is_ok(),
                    _ = shutdown.wait_for(|&s| s) => false,
                };
                if !sent || failed {
                    return;
                }
            }
        });
        observed(
            "/workerid.v1.Ids/StreamIds",
            std::future::ready(Ok(ReceiverStream::new(rx))),
        )
        .await
    }

    async fn decode(&self, request: Request<DecodeRequest>) -> Result<Response<DecodedId>, Status> {
        let id = request.into_inner().id;
        let decoded = if id > self.layout.layout.max_id() {
            Err(status::invalid(
                "invalid_id",
                format!(
                    "{id} is larger than the largest ID of this server's layout, {}",
                    self.layout.layout.max_id()
                ),
            ))
        } else {
            let parts = self.layout.layout.decompose(id);
            let unix_ms = parts
                .time
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            Ok(DecodedId {
                unix_ms,
                worker_id: parts.worker_id,
                sequence: parts.sequence,
            })
        };
        observed("/workerid.v1.Ids/Decode", std::future::ready(decoded)).await
    }

    async fn layout(
        &self,
        _request: Request<LayoutRequest>,
    ) -> Result<Response<SnowflakeLayout>, Status> {
        let SnowflakeLayoutSetting { name, layout, pool } = &self.layout;
        let (namespace, max_worker_id) = pool.clone().unwrap_or_default();
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let answer = SnowflakeLayout {
            name: name.clone(),
            timestamp_bits: layout.timestamp_bits().into(),
            worker_bits: layout.worker_bits().into(),
            sequence_bits: layout.sequence_bits().into(),
            unit_ms: ms(layout.unit()),
            epoch_unix_ms: ms(layout.epoch()),
            sequence_then_worker: layout.field_order() == FieldOrder::SequenceThenWorker,
            namespace,
            max_worker_id,
        };
        observed("/workerid.v1.Ids/Layout", std::future::ready(Ok(answer))).await
    }
}
