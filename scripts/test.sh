#!/usr/bin/env bash
# The one test command: installs what the tests need (scripts/setup.sh),
# then runs every test of the workspace, and the loom models of the
# lock-free paths (scripts/loom.sh).
#   bash scripts/test.sh                      # all tests
#   bash scripts/test.sh -p workerid-memory   # extra arguments go to cargo test,
#                                             # only the packages named with -p
#                                             # (and the loom models are left out)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PATH:/usr/sbin:/usr/lib/postgresql/$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)/bin"
# Every test binary through scripts/test-binary.sh: a hung one is stopped
# with its stacks printed, and a slow one says how long it took.
host=$(rustc -vV | sed -n 's/^host: //p')
# Cargo splits a runner's path at whitespace.
if [[ $PWD =~ [[:space:]] ]]; then
  echo "scripts/test.sh: the checkout's path has whitespace, which cargo's runner setting cannot take: $PWD" >&2
  exit 2
fi
export "CARGO_TARGET_$(tr 'a-z.-' 'A-Z__' <<<"$host")_RUNNER=$PWD/scripts/test-binary.sh"
# Every package unless the arguments name some: with `--workspace`, cargo
# would test them all whatever `-p` says.
scope=(--workspace)
for arg in "$@"; do
  case $arg in
    -p | -p* | --package | --package=* | --manifest-path | --manifest-path=*) scope=() ;;
  esac
done
cargo test "${scope[@]}" "$@"
if [ $# -eq 0 ]; then
  bash scripts/loom.sh
fi
