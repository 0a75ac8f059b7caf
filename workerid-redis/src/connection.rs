//! One connection type over a single server or a cluster.

use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// A multiplexed, self-reconnecting connection to a server, or to a cluster.
/// Cheap to clone: clones share the connection.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(Arc<Single>),
    Cluster(ClusterConnection),
}

/// The connection to a single server.
///
/// `ConnectionManager` reconnects when the connection breaks, not when an
/// answer times out. A link that silently drops packets (a partition, a
/// half-open connection) breaks nothing: every request would wait its
/// timeout behind the dead connection until TCP gives up, minutes later.
/// So an answer that times out replaces the connection; the new one
/// connects on its next request.
pub(crate) struct Single {
    client: Client,
    config: ConnectionManagerConfig,
    /// The connection, and how many times it was replaced.
    current: Mutex<(u64, ConnectionManager)>,
}

impl Single {
    /// A connection to `client`'s server, made at once (an unreachable server
    /// is an error here, not at the first request).
    pub(crate) async fn connect(
        client: Client,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Self> {
        let manager = ConnectionManager::new_with_config(client.clone(), config.clone()).await?;
        Ok(Single {
            client,
            config,
            current: Mutex::new((0, manager)),
        })
    }

    fn current(&self) -> (u64, ConnectionManager) {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces connection number `generation` (unless another request has
    /// replaced it already) with one that connects on first use.
    fn replace(&self, generation: u64) {
        let fresh =
            match ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
            {
                Ok(fresh) => fresh,
                Err(e) => {
                    tracing::warn!("cannot replace a Redis connection that timed out: {e}");
                    return;
                }
            };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.0 == generation {
            tracing::info!("a Redis answer timed out: the connection is replaced");
            *current = (generation + 1, fresh);
        }
    }

    /// Sends with the current connection, replacing it when the answer times out.
    async fn send<T>(
        &self,
        request: impl AsyncFnOnce(&mut ConnectionManager) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let (generation, mut manager) = self.current();
        let answer = request(&mut manager).await;
        if answer.as_ref().is_err_and(|e| e.is_timeout()) {
            self.replace(generation);
        }
        answer
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => Box::pin(
                c.send(async move |m: &mut ConnectionManager| m.req_packed_command(cmd).await),
            ),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => Box::pin(c.send(async move |m: &mut ConnectionManager| {
                m.req_packed_commands(cmd, offset, count).await
            })),
            Connection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.current().1.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}
