#!/usr/bin/env bash
# Soaks under real network faults, recorded as
# docs/benchmarks/<date>-soak-network.md: on durable Redis, PostgreSQL,
# MariaDB and one etcd node, library clients in network namespaces
# (partitions, one-way loss, lossy, half-open and stalled links), then three
# workerid-server processes each cut from its store while its HTTP clients
# still reach it. Needs root (network namespaces, iptables).
#   bash scripts/soak-network.sh                 # 120 s per lease run, 90 s per service run
#   LEASE_SECS=600 SERVICE_SECS=600 bash scripts/soak-network.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PATH:/usr/sbin:/usr/lib/postgresql/$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)/bin"
lease_secs=${LEASE_SECS:-120}
service_secs=${SERVICE_SECS:-90}
stores=(redis-durable postgres mariadb etcd)
cargo build -q --release -p workerid-faults --bins
cargo build -q --release -p workerid-server
export WORKERID_SERVER_BIN=target/release/workerid-server
# The summaries only (stdout), not the nemesis's log lines.
export RUST_LOG=error
body=$(mktemp)
trap 'rm -f "$body"' EXIT
status=0
# One run: its summary (the lines after the nemesis's log) under a heading.
run() {
  local title=$1
  shift
  printf '## %s\n\n```\n' "$title" >>"$body"
  if target/release/workerid-faults "$@" 2>/dev/null | grep -v '^seed .* (replay with' >>"$body"; then
    echo "exit 0" >>"$body"
  else
    echo "exit 1" >>"$body"
    status=1
  fi
  printf '```\n\n' >>"$body"
}
for store in "${stores[@]}"; do
  run "library clients, $store" --store "$store" --network --client-faults-only \
    --faults partition-clients,drop-replies,drop-requests,lossy-link,half-open,stall-link,slow-link,partition-store \
    --clients 4 --worker-bits 3 --duration-secs "$lease_secs"
done
for store in "${stores[@]}"; do
  run "service, $store" --service --store "$store" --network \
    --service-faults cut-server-from-store,drop-store-replies,lossy-store-link,half-open-store-link,slow-store-link,partition-store \
    --duration-secs "$service_secs"
done
cargo run -q --release -p benches --bin record -- soak-network \
  "LEASE_SECS=$lease_secs SERVICE_SECS=$service_secs bash scripts/soak-network.sh" <"$body"
exit $status
