//! What the Redis store's fault tests share.

use std::future::Future;
use std::time::{Duration, Instant};

use workerid_core::{LeaseOptions, Result};

/// The lease options of these tests: 16 worker IDs, a 3 s request timeout.
pub fn options() -> LeaseOptions {
    LeaseOptions::new()
        .worker_bits(4)
        .max_lease_time(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(3))
}

/// Retries `op` while it is `Unavailable` (a reconnect in progress, a
/// replica still syncing), for at most 15 s; returns the first other
/// answer.
pub async fn retry_unavailable<T, F, Fut>(mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match op().await {
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            answer => return answer,
        }
    }
}
