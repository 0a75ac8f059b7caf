//! etcd: acquire, renew and release through the Allocator, on a single node
//! and on a 3-member cluster, each beside one raw guarded transaction on the
//! store's own client (the physical limit: one Raft round trip). Measured
//! interleaved, so the machine's load drifts over all of them alike.
//!
//! `cargo bench -p benches --bench etcd` (starts its own servers).

use benches::Op;
use workerid_etcd::EtcdStore;
use workerid_servers::etcd::{EtcdCluster, EtcdServer};

const ROUNDS: usize = 1000;

async fn measure(name: &str, endpoints: &[String]) {
    let store = EtcdStore::connect(endpoints).await.expect("connect");
    let raw = benches::etcd_raw_txn(&store).await;
    let allocator = benches::allocator(store, "bench", 16);
    let raw: Op = Box::new(move || raw());
    let raw_name = "raw guarded txn (one round trip)";
    benches::lease_ops_table(name, raw_name, raw, &allocator, ROUNDS).await;
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let node = EtcdServer::start();
    rt.block_on(measure("etcd, single node", &[node.endpoint()]));
    drop(node);
    let cluster = EtcdCluster::start();
    rt.block_on(measure("etcd, 3 members", &cluster.endpoints()));
}
