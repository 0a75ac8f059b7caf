//! One connection type over a single server or a cluster.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster_async::ClusterConnection;
use redis::{
    Client, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, Pipeline, RedisError, RedisFuture,
    RedisResult, ServerErrorKind, Value,
};

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
///
/// Behind Sentinels, the server is the master they name: an answer that
/// says the server is gone or no longer the master (no connection, a
/// timeout, `READONLY`, `MASTERDOWN`, `LOADING`) asks them again and
/// connects to the master they name now.
pub(crate) struct Single {
    server: Server,
    config: ConnectionManagerConfig,
    /// The connection, and how many times it was replaced.
    current: Mutex<(u64, ConnectionManager)>,
    /// Behind Sentinels: the master's address the connection goes to.
    master_at: Mutex<Option<(String, u16)>>,
}

/// Where the single server is.
pub(crate) enum Server {
    /// At the client's address.
    Fixed(Client),
    /// Wherever the Sentinels say the master is.
    Sentinel(SentinelMaster),
}

/// A master found through Sentinels.
pub(crate) struct SentinelMaster {
    /// One client per Sentinel, asked in turn, with its connection once
    /// made (kept, so that asking every [`FOLLOW_EVERY`] opens nothing).
    sentinels: Vec<(Client, tokio::sync::Mutex<Option<MultiplexedConnection>>)>,
    /// The name the Sentinels know the master by.
    name: String,
    /// The master's settings (database, user, password, socket options);
    /// the address is the Sentinels' answer.
    master: ConnectionInfo,
    /// How long one Sentinel may take to answer.
    timeout: Duration,
}

impl SentinelMaster {
    pub(crate) fn new(
        sentinels: Vec<Client>,
        name: String,
        master: ConnectionInfo,
        timeout: Duration,
    ) -> Self {
        SentinelMaster {
            sentinels: sentinels
                .into_iter()
                .map(|client| (client, tokio::sync::Mutex::new(None)))
                .collect(),
            name,
            master,
            timeout,
        }
    }

    /// The address of the master the first Sentinel to answer names.
    async fn resolve(&self) -> RedisResult<(String, u16)> {
        let mut last = None;
        for (sentinel, kept) in &self.sentinels {
            let asked = tokio::time::timeout(self.timeout, async {
                let mut kept = kept.lock().await;
                let mut connection = match kept.as_ref() {
                    Some(connection) => connection.clone(),
                    None => sentinel.get_multiplexed_async_connection().await?,
                };
                let answer = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.name)
                    .query_async::<Option<(String, u16)>>(&mut connection)
                    .await;
                // A connection that failed is made again next time.
                *kept = answer.is_ok().then_some(connection);
                answer
            })
            .await;
            match asked {
                Ok(Ok(Some(address))) => return Ok(address),
                Ok(Ok(None)) => {
                    last = Some(RedisError::from((
                        ErrorKind::Io,
                        "no Sentinel knows the master",
                        self.name.clone(),
                    )))
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    // A Sentinel that did not answer gets a new connection.
                    *kept.lock().await = None;
                    last = Some(RedisError::from((
                        ErrorKind::Io,
                        "a Sentinel did not answer in time",
                    )))
                }
            }
        }
        Err(last.unwrap_or_else(|| RedisError::from((ErrorKind::Io, "no Sentinel given"))))
    }

    /// A client for the master at `(host, port)`.
    fn client_for(&self, (host, port): (String, u16)) -> RedisResult<Client> {
        Client::open(
            self.master
                .clone()
                .set_addr(ConnectionAddr::Tcp(host, port)),
        )
    }
}

/// How often a connection behind Sentinels asks them which master to use.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Asks the Sentinels every [`FOLLOW_EVERY`] which master to use, and moves
/// the connection when they name another: a master that failed and was
/// started again answers as a master until the Sentinels demote it, and
/// writes made there meanwhile are lost when it becomes a replica. Ends
/// with the connection.
async fn follow_the_master(single: std::sync::Weak<Single>) {
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let Some(single) = single.upgrade() else {
            return;
        };
        let Server::Sentinel(sentinels) = &single.server else {
            return;
        };
        let Ok(named) = sentinels.resolve().await else {
            continue;
        };
        let used = single
            .master_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if used.as_ref() != Some(&named) {
            let generation = single.current().0;
            single
                .ask_sentinels(generation, "the Sentinels name another master")
                .await;
        }
    }
}

/// Whether `e` says the server is gone or no longer the master.
fn master_lost(e: &RedisError) -> bool {
    e.is_timeout()
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown | ServerErrorKind::BusyLoading
            )
        )
        // A script's write refused by a replica comes back as a script error.
        || e.to_string().contains("READONLY")
}

impl Single {
    /// A connection to `server`, made at once (an unreachable server is an
    /// error here, not at the first request).
    pub(crate) async fn connect(
        server: Server,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Arc<Self>> {
        let (client, master_at) = match &server {
            Server::Fixed(client) => (client.clone(), None),
            Server::Sentinel(sentinels) => {
                let address = sentinels.resolve().await?;
                (sentinels.client_for(address.clone())?, Some(address))
            }
        };
        let manager = ConnectionManager::new_with_config(client, config.clone()).await?;
        let single = Arc::new(Single {
            server,
            config,
            current: Mutex::new((0, manager)),
            master_at: Mutex::new(master_at),
        });
        if matches!(single.server, Server::Sentinel(_)) {
            tokio::spawn(follow_the_master(Arc::downgrade(&single)));
        }
        Ok(single)
    }

    /// Behind Sentinels: asks them which master to use, and moves the
    /// connection there if it goes elsewhere.
    async fn ask_sentinels(&self, generation: u64, why: &str) {
        let Server::Sentinel(sentinels) = &self.server else {
            return;
        };
        let address = match sentinels.resolve().await {
            Ok(address) => address,
            Err(e) => {
                tracing::warn!("no Sentinel names a master: {e}");
                return;
            }
        };
        match sentinels.client_for(address.clone()) {
            Ok(client) => {
                if self.replace(generation, client, why) {
                    *self
                        .master_at
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(address);
                }
            }
            Err(e) => tracing::warn!("cannot connect to the master the Sentinels name: {e}"),
        }
    }

    fn current(&self) -> (u64, ConnectionManager) {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces connection number `generation` (unless another request has
    /// replaced it already) with one to `client` that connects on first use;
    /// whether it did.
    fn replace(&self, generation: u64, client: Client, why: &str) -> bool {
        let fresh = match ConnectionManager::new_lazy_with_config(client, self.config.clone()) {
            Ok(fresh) => fresh,
            Err(e) => {
                tracing::warn!("cannot replace a Redis connection ({why}): {e}");
                return false;
            }
        };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.0 != generation {
            return false;
        }
        tracing::info!("{why}: the Redis connection is replaced");
        *current = (generation + 1, fresh);
        true
    }

    /// Sends with the current connection, replacing it when the answer times
    /// out, or, behind Sentinels, when the master is gone.
    async fn send<T>(
        &self,
        request: impl AsyncFnOnce(&mut ConnectionManager) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let (generation, mut manager) = self.current();
        let answer = request(&mut manager).await;
        if let Err(e) = &answer {
            match &self.server {
                Server::Fixed(client) if e.is_timeout() => {
                    self.replace(generation, client.clone(), "an answer timed out");
                }
                Server::Sentinel(_) if master_lost(e) => {
                    self.ask_sentinels(generation, "the master is gone").await;
                }
                _ => {}
            }
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
