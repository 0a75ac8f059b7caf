#!/usr/bin/env bash
# Mutation testing of the code that carries the contract's rules: each area's
# files are mutated one change at a time and judged by the tests named for
# it. Results go to mutants.out/<area>/mutants.out/ (caught.txt, missed.txt,
# ...);
# docs/conformance.md records the latest run and explains every missed mutant.
#
#   cargo install --locked cargo-mutants   # once
#   bash scripts/mutants.sh                # every area
#   bash scripts/mutants.sh memory         # one area
set -euo pipefail
# The file globs are for cargo-mutants, not the shell.
set -f
cd "$(dirname "$0")/.."

if ! cargo mutants --version >/dev/null 2>&1; then
  echo "cargo-mutants is not installed: cargo install --locked cargo-mutants" >&2
  exit 2
fi

# area | files to mutate | packages whose tests judge them
areas=(
  "memory|workerid-memory/src/*.rs|workerid-memory"
  "allocator|workerid-core/src/allocator.rs|workerid-core workerid-memory"
  "segments|workerid-segment/src/allocator.rs workerid-segment/src/batch.rs workerid-segment/src/cursor.rs|workerid-segment workerid-memory"
  "snowflake|workerid-snowflake/src/worker.rs|workerid-snowflake workerid-memory"
  "reservation|workerid-snowflake/src/reservation.rs|workerid-snowflake workerid-memory"
  "layout|workerid-snowflake/src/layout.rs|workerid-snowflake"
  "segment-tags|workerid-segment/src/tag.rs workerid-segment/src/local.rs workerid-segment/src/gapless.rs|workerid-segment workerid-memory"
  "generator|workerid-snowflake/src/generator.rs workerid-snowflake/src/generator/packing.rs workerid-snowflake/src/generator/reading.rs workerid-snowflake/src/generator/lease.rs workerid-snowflake/src/generator/claim.rs workerid-snowflake/src/generator/tick_cell.rs workerid-snowflake/src/generator/system_cell.rs workerid-snowflake/src/clock.rs workerid-snowflake/src/clock/os_linux.rs workerid-snowflake/src/ticking.rs workerid-snowflake/src/local.rs workerid-snowflake/src/meters.rs|workerid-snowflake"
)

wanted=("$@")
status=0
for entry in "${areas[@]}"; do
  IFS='|' read -r area files packages <<<"$entry"
  if ((${#wanted[@]})) && [[ ! " ${wanted[*]} " == *" $area "* ]]; then
    continue
  fi
  args=(--workspace --no-shuffle --output "mutants.out/$area")
  for file in $files; do args+=(--file "$file"); done
  for package in $packages; do args+=(--test-package "$package"); done
  mkdir -p "mutants.out/$area"
  echo "== $area: $files, judged by $packages"
  # cargo-mutants exits 2 when mutants are missed, 3 on timeouts.
  cargo mutants "${args[@]}" || status=$?
done
exit "$status"
