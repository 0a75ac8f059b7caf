#!/usr/bin/env bash
# Load benchmark of the HTTP service's /alloc with wrk (installed from Debian
# when missing): the release build of workerid-server on a SQLite file in a
# temporary directory, one request per round trip and 16 pipelined, then
# batches of 100 and 10 000 IDs per request (count=), ROUNDS rounds each
# (default 6), then the median and range of requests and IDs per second;
# then the gRPC API and the client crate (benches/src/bin/grpc.rs, recorded
# on its own).
#   bash benches/http/run.sh            # this build
#   bash benches/http/run.sh OTHER_BIN  # ...taking turns with another build
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-6}
if ! command -v wrk >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get install -y -qq wrk >/dev/null
fi
cargo build --release -q -p workerid-server -p benches --bin workerid-server --bin record
builds=("$PWD/target/release/workerid-server" "$@")
pipeline="$PWD/benches/http/pipeline.lua"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port/alloc?biz_tag=test"

one_run() { # binary, query suffix, extra wrk arguments... -> requests per second
  local bin=$1 url="$base$2" dir pid rate; shift 2
  dir=$(mktemp -d)
  (cd "$dir" && exec "$bin" --workers 1 --listen "127.0.0.1:$port" >/dev/null 2>&1) &
  pid=$!
  for _ in $(seq 100); do curl -sf "$base" >/dev/null && break; sleep 0.1; done
  rate=$(wrk -t1 -c32 -d4s "$@" "$url" | awk '/Requests\/sec/ {print $2}')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  echo "${rate:-0}"
}

declare -A results
for ((round = 1; round <= rounds; round++)); do
  for bin in "${builds[@]}"; do
    results["$bin plain"]+="$(one_run "$bin" "") "
    results["$bin pipelined"]+="$(one_run "$bin" "" -s "$pipeline") "
    results["$bin 100"]+="$(one_run "$bin" "&count=100") "
    results["$bin 10000"]+="$(one_run "$bin" "&count=10000") "
  done
done
table=$(
  echo "| build | requests | median req/s | range | median IDs/s |"
  echo "| --- | --- | --- | --- | --- |"
  for bin in "${builds[@]}"; do
    for kind in plain pipelined 100 10000; do
      echo "${results["$bin $kind"]}" | tr ' ' '\n' | grep . | sort -n | awk -v b="${bin#"$PWD"/}" -v k="$kind" '
        { v[NR] = $1 }
        END {
          m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          n = (k == "plain" || k == "pipelined") ? 1 : k
          what = (k == "plain") ? "one ID per round trip" : (k == "pipelined") ? "one ID, 16 pipelined" : "count=" k " per round trip"
          printf "| %s | %s | %.0f | %.0f to %.0f | %.0f |\n", b, what, m, v[1], v[NR], m * n
        }'
    done
  done
  echo
  echo "Goal: count=10000 as a JSON array serves at least 20 000 000 IDs/s; the one-ID rates do not fall."
)
echo "$table"
echo "$table" | cargo run -q --release -p benches --bin record -- \
  http "bash benches/http/run.sh ($rounds rounds of 4 s each, wrk -t1 -c32)"
cargo run -q --release -p benches --bin grpc
