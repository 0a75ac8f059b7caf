#!/usr/bin/env bash
# Failovers measured, recorded as docs/benchmarks/<date>-soak-failover.md:
# Redis (a master, its replica and three Sentinels) without waiting for the
# replica and with wait_replicas=1 (workerid-faults/tests/redis_failover.rs);
# a Redis Cluster of three masters with a replica each, the master holding
# the keys killed, with and without wait_replicas=1
# (workerid-faults/tests/redis_cluster_failover.rs); PostgreSQL (a primary
# and a streaming standby promoted when the primary dies) with the standby
# asynchronous, synchronous with the sessions at
# synchronous_commit=local and remote_apply, and synchronous
# (workerid-faults/tests/postgres_failover.rs). The primary is killed under
# load again and again.
#   bash scripts/soak-failover.sh                   # 30 failovers each
#   FAILOVERS=100 bash scripts/soak-failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PATH:/usr/sbin:/usr/lib/postgresql/$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)/bin"
failovers=${FAILOVERS:-30}
body=$(mktemp)
trap 'rm -f "$body"' EXIT
status=0
# One test of one binary: the summary lines (what the failovers broke and
# cost) under a heading.
measure() {
  local binary=$1 test=$2
  printf '## %s\n\n```\n' "$test" >>"$body"
  if WORKERID_FAILOVERS=$failovers cargo test -q --release -p workerid-faults \
    --test "$binary" "$test" -- --exact --include-ignored --nocapture 2>/dev/null |
    grep -E '^((cluster )?wait_replicas=|an? (a)?synchronous standby)' >>"$body"; then
    echo "exit 0" >>"$body"
  else
    echo "exit 1" >>"$body"
    status=1
  fi
  printf '```\n\n' >>"$body"
}
measure redis_failover without_waiting_failovers_lose_acknowledged_writes
measure redis_failover waiting_for_the_replica_loses_nothing_across_failovers
measure redis_cluster_failover without_waiting_cluster_failovers_lose_acknowledged_writes
measure redis_cluster_failover waiting_for_the_replica_loses_nothing_across_cluster_failovers
measure postgres_failover with_an_asynchronous_standby_failovers_lose_acknowledged_writes
measure postgres_failover a_synchronous_standby_loses_nothing_across_failovers
cargo run -q --release -p benches --bin record -- soak-failover \
  "FAILOVERS=$failovers bash scripts/soak-failover.sh" <"$body"
exit $status
