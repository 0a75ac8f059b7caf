//! Quick start: lease a worker ID from the in-process store, renew it,
//! release it. Run with `cargo run --example quickstart`.

use std::time::Duration;

use workerid::memory::MemoryStore;
use workerid::{Allocator, Error, LeaseOptions};

#[tokio::main]
async fn main() -> Result<(), Error> {
    // A pool of 2^8 = 256 worker IDs in the namespace "mycluster", leased for 30 s.
    let options = LeaseOptions::new()
        .worker_bits(8)
        .max_lease_time(Duration::from_secs(60))
        .ttl(Duration::from_secs(30));
    let allocator = Allocator::new(MemoryStore::new(), "mycluster", options)?;

    let mut lease = allocator.acquire().await?;
    println!(
        "acquired worker ID {} with token {}",
        lease.id(),
        lease.token()
    );
    println!(
        "  fence {}, previous watermark {}",
        lease.fence(),
        lease.previous_watermark()
    );
    println!("  hold it until {:?} from now", lease.time_left());

    allocator.renew(&mut lease).await?;
    println!("renewed: {:?} left", lease.time_left());

    // The seed library's style: an ID and a token string.
    let (other, token) = allocator.get_id().await?;
    println!("acquired worker ID {other} with token {token}");
    match allocator
        .renew_id(u64::from(other), "not-a-valid-token")
        .await
    {
        Err(err @ Error::InvalidToken { .. }) => println!("a bad token is refused: {err}"),
        unexpected => println!("unexpected: {unexpected:?}"),
    }
    allocator.release_id(u64::from(other), &token).await?;

    allocator.release(&lease).await?;
    println!("released worker ID {}", lease.id());
    Ok(())
}
