//! etcd: acquire, renew and release through the Allocator, on a single node
//! and on a 3-member cluster, each beside one raw guarded transaction on the
//! store's own client (the physical limit: one Raft round trip). Measured
//! interleaved, so the machine's load drifts over all of them alike.
//!
//! Then acquire in an empty vs a 99%-full 2^16 pool on the single node
//! (filling it takes about 100 s).
//!
//! `cargo bench -p benches --bench etcd` (starts its own servers).

use benches::{acquire_op, release_op, Slot};
use workerid::etcd::EtcdStore;
use workerid_testkit::etcd::{EtcdCluster, EtcdServer};

const ROUNDS: usize = 1000;

async fn measure(name: &str, endpoints: &[String]) {
    let store = EtcdStore::connect(endpoints).await.expect("connect");
    let raw = benches::etcd_raw_txn(&store).await;
    let allocator = benches::allocator(store, "bench", 16);
    let raw_name = "raw guarded txn (one round trip)";
    benches::lease_ops_table(name, raw_name, &raw, &allocator, ROUNDS).await;
}

/// Acquire in an empty 2^16 pool vs a 99%-full one, interleaved.
async fn full_vs_empty(endpoints: &[String]) {
    let store = EtcdStore::connect(endpoints).await.expect("connect");
    let empty = benches::allocator(store.clone(), "bench-empty", 16);
    let full = std::sync::Arc::new(benches::allocator(store, "bench-full", 16));
    let _held = benches::fill_to_99_percent(&full).await;
    let (empty_slot, full_slot) = (Slot::default(), Slot::default());
    let results = benches::interleaved(
        ROUNDS / 2,
        vec![
            ("acquire, empty 2^16 pool", acquire_op(&empty, &empty_slot)),
            ("release, empty pool", release_op(&empty, &empty_slot)),
            ("acquire, 99% full 2^16 pool", acquire_op(&full, &full_slot)),
            ("release, full pool", release_op(&full, &full_slot)),
        ],
    )
    .await;
    benches::print_table(
        "etcd, single node, full vs empty",
        &results,
        &[(
            "acquire, 99% full 2^16 pool",
            "acquire, empty 2^16 pool",
            1.5,
        )],
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let node = EtcdServer::start();
    rt.block_on(measure("etcd, single node", &[node.endpoint()]));
    rt.block_on(full_vs_empty(&[node.endpoint()]));
    drop(node);
    let cluster = EtcdCluster::start();
    rt.block_on(measure("etcd, 3 members", &cluster.endpoints()));
    benches::record::record_transcript("etcd", "cargo bench -p benches --bench etcd");
}
