#!/usr/bin/env bash
# SQLite's disk syncs per renewal, which workerid-scale cannot count itself
# (SQLite keeps no counter): while workerid-scale keeps WORKERS live workers
# on a SQLite file, perf counts the fsync and fdatasync calls of its process
# over COUNTED seconds of the steady window, and the syncs are divided by the
# renewals the window's rate gives for those seconds. Installs linux-perf
# from Debian when perf is missing; records the result as
# docs/benchmarks/<date>-sizing-sqlite-syncs.md.
#   bash workerid-scale/sqlite-syncs.sh                  # 20000 workers, 20 s counted
#   WORKERS=80000 bash workerid-scale/sqlite-syncs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${WORKERS:-20000}
counted=${COUNTED:-20}
# The joins are spread over one renew period; counting starts this many
# seconds after the start, well inside the steady window.
wait_secs=${WAIT:-20}
if ! command -v perf >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get install -y -qq linux-perf >/dev/null
fi
cargo build --release -q -p workerid-scale -p benches --bin workerid-scale --bin record
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
command="workerid-scale --store sqlite --workers $workers --seconds $((wait_secs + counted + 10)) --churn-seconds 0"
# shellcheck disable=SC2086 # the command's words are meant to split
target/release/$command >"$out/scale.md" 2>"$out/scale.log" &
pid=$!
sleep "$wait_secs"
perf stat -x, -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -p "$pid" \
  -- sleep "$counted" 2>"$out/perf.csv"
wait "$pid"
joined=$(grep -o 'joined in [0-9.]* s' "$out/scale.md" | awk '{print $3}')
if awk -v j="${joined:-999}" -v w="$wait_secs" 'BEGIN { exit !(j + 2 > w) }'; then
  echo "the joins took ${joined:-?} s, into the counted seconds: run again with a larger WAIT" >&2
  exit 1
fi
syncs=$(awk -F, '$1 ~ /^[0-9]+$/ { s += $1 } END { print s + 0 }' "$out/perf.csv")
rate=$(awk -F'|' '/^\| SQLite/ { gsub(/ /, "", $4); print $4 }' "$out/scale.md")
table=$(
  cat "$out/scale.md"
  echo
  echo "| workers | renews/s (steady window) | seconds counted | fsync + fdatasync | disk syncs per renewal |"
  echo "| --- | --- | --- | --- | --- |"
  awk -v w="$workers" -v r="$rate" -v c="$counted" -v s="$syncs" \
    'BEGIN { printf "| %d | %d | %d | %d | %.4f |\n", w, r, c, s, s / (r * c) }'
)
echo "$table"
echo "$table" | target/release/record \
  sizing-sqlite-syncs "bash workerid-scale/sqlite-syncs.sh ($command; perf stat over $counted s of its steady window)"
