//! etcd: acquire, renew and release through the Allocator, on a single node
//! and on a 3-member cluster, each beside one raw guarded transaction on the
//! store's own client (the physical limit: one Raft round trip). Measured
//! interleaved, so the machine's load drifts over all of them alike.
//!
//! `cargo bench -p benches --bench etcd` (starts its own servers).

use benches::{acquire_op, release_op, renew_op, Op, Slot};
use workerid_etcd::EtcdStore;
use workerid_servers::etcd::{EtcdCluster, EtcdServer};

const ROUNDS: usize = 1000;

async fn measure(name: &str, endpoints: &[String]) {
    let store = EtcdStore::connect(endpoints).await.expect("connect");
    let raw = benches::etcd_raw_txn(&store).await;
    let allocator = benches::allocator(store, "bench", 16);
    let held = allocator.acquire().await.expect("acquire");
    let slot = Slot::default();
    const RAW: &str = "raw guarded txn (one round trip)";
    let raw: Op = Box::new(move || raw());
    let results = benches::interleaved(
        ROUNDS,
        vec![
            (RAW, raw),
            ("acquire", acquire_op(&allocator, &slot)),
            ("release", release_op(&allocator, &slot)),
            ("renew", renew_op(&allocator, &held)),
        ],
    )
    .await;
    benches::print_table(
        &format!("{name}, interleaved ({ROUNDS} rounds)"),
        &results,
        &[
            ("acquire", RAW, 1.2),
            ("renew", RAW, 1.2),
            ("release", RAW, 1.2),
        ],
    );
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
