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
# A filter that matches nothing passes, and one that matches other tests
# runs them on loom's atomics outside a model: neither checks anything.
if grep -E '^test .* \.\.\. ' "$out" | grep -vq 'loom_tests::'; then
  echo "the filter matches tests that are not loom models" >&2
  exit 1
fi
models=("loom_tests::")
if [ $# -eq 0 ]; then models=("cursor::loom_tests::" "generator::"); fi
for model in "${models[@]}"; do
  if ! grep -Eq "^test .*${model}.* \.\.\. ok$" "$out"; then
    echo "no loom model matching ${model} ran" >&2
    exit 1
  fi
done
