#!/usr/bin/env bash
# The loom models of the lock-free paths (workerid-snowflake's generator
# and clocks, workerid-segment's cursor: the `loom_tests` modules): the
# real code built with loom's atomics and locks (`--cfg workerid_loom`), in
# a target directory of its own so that the workspace's build is not
# invalidated.
#   bash scripts/loom.sh                              # every model
#   bash scripts/loom.sh tick_cell::loom_tests        # the models whose paths
#   bash scripts/loom.sh loom_tests::a_seal           # contain this
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}/loom"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RUSTFLAGS="--cfg workerid_loom" CARGO_TARGET_DIR="$target" \
  cargo test -p workerid-snowflake -p workerid-segment --lib --release "${1:-loom_tests::}" \
  2>&1 | tee "$out"
# A filter that matches nothing passes: say so (every model: in each crate).
want=2
if [ $# -gt 0 ]; then want=1; fi
if [ "$(grep -Ec "test result: ok\. [1-9][0-9]* passed" "$out")" -lt "$want" ]; then
  echo "no loom model ran (in one of the crates)" >&2
  exit 1
fi
