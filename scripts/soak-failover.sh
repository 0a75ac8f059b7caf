#!/usr/bin/env bash
# Redis failovers measured, recorded as docs/benchmarks/<date>-soak-failover.md:
# a master, its replica and three Sentinels; the master killed under load
# again and again, without waiting for the replica and with
# wait_replicas=1 (workerid-faults/tests/redis_failover.rs).
#   bash scripts/soak-failover.sh                   # 30 failovers each
#   FAILOVERS=100 bash scripts/soak-failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
failovers=${FAILOVERS:-30}
body=$(mktemp)
trap 'rm -f "$body"' EXIT
status=0
for test in without_waiting_failovers_lose_acknowledged_writes \
  waiting_for_the_replica_loses_nothing_across_failovers; do
  printf '## %s\n\n```\n' "$test" >>"$body"
  if WORKERID_FAILOVERS=$failovers cargo test -q --release -p workerid-faults \
    --test redis_failover "$test" -- --exact --include-ignored --nocapture 2>/dev/null |
    grep '^wait_replicas=' >>"$body"; then
    echo "exit 0" >>"$body"
  else
    echo "exit 1" >>"$body"
    status=1
  fi
  printf '```\n\n' >>"$body"
done
cargo run -q --release -p benches --bin record -- soak-failover \
  "FAILOVERS=$failovers bash scripts/soak-failover.sh" <"$body"
exit $status
