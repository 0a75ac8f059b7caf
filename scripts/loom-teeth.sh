#!/usr/bin/env bash
# The loom models' teeth: makes each change below in a scratch copy of the
# committed tree (a git worktree of HEAD) and checks that the model named
# beside it fails on an assertion (a change that does not compile, or a
# model that still passes, fails this script). About a minute.
#   bash scripts/loom-teeth.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=$(mktemp -d)
git worktree add -q --detach "$scratch/tree" HEAD
trap 'git -C "$root" worktree remove --force "$scratch/tree"; rm -rf "$scratch"' EXIT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}/loom-teeth"
export RUSTFLAGS="--cfg workerid_loom"

# One edit per line, tab-separated: the change it belongs to, the file,
# the text, its replacement (\n for a new line), and for the change's
# first edit the crate and the model that must fail. Edits of one change
# are made together.
changes=$(cat <<'TABLE'
gate-not-shut	workerid-snowflake/src/generator/lease.rs	        self.system_cell.shut(&gate);	        let _ = &gate;	workerid-snowflake	system_cell::loom_tests::a_lowered_window_holds_for_every_call_that_begins_after_it
gate-opened-unlocked	workerid-snowflake/src/generator/system_cell.rs	        let Some(setting) = self.system_cell.try_setting() else {\n            return;\n        };\n        let to_since	        let to_since	workerid-snowflake	system_cell::loom_tests::a_lowered_window_holds_for_every_call_that_begins_after_it
gate-opened-unlocked	workerid-snowflake/src/generator/system_cell.rs	        self.system_cell.open(&setting, gate);	        let Some(setting) = self.system_cell.try_setting() else {\n            return;\n        };\n        self.system_cell.open(&setting, gate);
increment-unchecked	workerid-snowflake/src/generator/system_cell.rs	        if gate.admits_increment(current, this.packing.seq_limit_but_last()) {	        if current != u64::MAX {	workerid-snowflake	system_cell::loom_tests::a_seal_bounds_every_id_of_calls_in_flight
increment-unchecked-raised	workerid-snowflake/src/generator/system_cell.rs	        if gate.admits_increment(current, this.packing.seq_limit_but_last()) {	        if current != u64::MAX {	workerid-snowflake	system_cell::loom_tests::a_raised_last_holds_for_every_call_that_begins_after_it
end-stored-first	workerid-snowflake/src/generator/system_cell.rs	        self.base.store(gate.base, Ordering::Release);\n        self.os_to_wall.store(gate.os_to_wall, Ordering::Relaxed);\n        self.end.store(gate.end, Ordering::Release);	        self.end.store(gate.end, Ordering::Release);\n        self.base.store(gate.base, Ordering::Release);\n        self.os_to_wall.store(gate.os_to_wall, Ordering::Relaxed);	workerid-snowflake	system_cell::loom_tests::a_reader_pairs_an_end_with_its_unit_or_a_newer_one
end-stored-relaxed	workerid-snowflake/src/generator/system_cell.rs	        self.end.store(gate.end, Ordering::Release);	        self.end.store(gate.end, Ordering::Relaxed);	workerid-snowflake	system_cell::loom_tests::a_reader_pairs_an_end_with_its_unit_or_a_newer_one
tick-update-unlocked	workerid-snowflake/src/generator/tick_cell.rs	        let _setting = self.setting.lock().unwrap_or_else(|e| e.into_inner());\n        let (mono, wall) = self.stored.read();	        let (mono, wall) = self.stored.read();	workerid-snowflake	tick_cell::loom_tests::a_close_holds_against_a_racing_tick_for_every_call_after_it
set-back-not-shut-eq	workerid-snowflake/src/ticking.rs	        if now.wall < stored.wall_ns.load(Ordering::Acquire) {	        if now.wall == stored.wall_ns.load(Ordering::Acquire) {	workerid-snowflake	tick_cell::loom_tests::a_wall_clock_set_back_is_never_read_ahead_once_its_time_is_stored
set-back-not-shut-gt	workerid-snowflake/src/ticking.rs	        if now.wall < stored.wall_ns.load(Ordering::Acquire) {	        if now.wall > stored.wall_ns.load(Ordering::Acquire) {	workerid-snowflake	tick_cell::loom_tests::a_wall_clock_set_back_is_never_read_ahead_once_its_time_is_stored
tick-fast-path-unchecked	workerid-snowflake/src/generator/tick_cell.rs	        if !tick.admits(current) {	        if current == u64::MAX {	workerid-snowflake	tick_cell::loom_tests::a_close_holds_against_a_racing_tick_for_every_call_after_it
local-window-unchecked	workerid-snowflake/src/local.rs	                if in_unit && self.ts <= self.shared.window_end() {	                if in_unit {	workerid-snowflake	system_cell::loom_tests::a_lowered_window_holds_for_a_local_handles_batch
local-tick-unchecked	workerid-snowflake/src/local.rs	                if tick.unit_base() == self.unit_base {	                if tick.unit_base() != 0 {	workerid-snowflake	tick_cell::loom_tests::a_close_holds_for_a_local_handles_batch
seqlock-either	workerid-segment/src/cursor.rs	        (before == generation && after == generation).then_some(view)	        (before == generation || after == generation).then_some(view)	workerid-segment	cursor::loom_tests::a_claim_across_a_slots_rewrite_never_shares_an_id
read-without-fence	workerid-segment/src/cursor.rs	        fence(Ordering::Acquire);\n        let after	        let after	workerid-segment	cursor::loom_tests::a_claim_across_a_slots_rewrite_never_shares_an_id
install-without-fence	workerid-segment/src/cursor.rs	        slot.sequence.store(WRITING, Ordering::Relaxed);\n        fence(Ordering::Release);	        slot.sequence.store(WRITING, Ordering::Relaxed);	workerid-segment	cursor::loom_tests::a_claim_across_a_slots_rewrite_never_shares_an_id
claim-add-relaxed	workerid-segment/src/cursor.rs	            let word = self.word.fetch_add(n, Ordering::Acquire);	            let word = self.word.fetch_add(n, Ordering::Relaxed);	workerid-segment	cursor::loom_tests::claims_racing_a_switch_get_each_id_once
TABLE
)

# Replaces FROM with TO once in FILE (both given with \n escapes).
edit() {
  FROM=$(printf '%b' "$2") TO=$(printf '%b' "$3") perl -0pi -e \
    '$n = s/\Q$ENV{FROM}\E/$ENV{TO}/; die "the text to change is not in $ARGV\n" unless $n' "$1"
}

failed=0
for change in $(cut -f1 <<<"$changes" | uniq); do
  git -C "$scratch/tree" checkout -q -- .
  crate="" model=""
  while IFS=$'\t' read -r id file from to edit_crate edit_model; do
    [ "$id" = "$change" ] || continue
    edit "$scratch/tree/$file" "$from" "$to"
    if [ -n "$edit_crate" ]; then crate=$edit_crate model=$edit_model; fi
  done <<<"$changes"
  log="$scratch/$change.log"
  (cd "$scratch/tree" && cargo test -p "$crate" --lib --release "$model" >"$log" 2>&1) && status=0 || status=$?
  if grep -q "^test .*$model \.\.\. FAILED" "$log"; then
    echo "$change: caught by $model"
  elif [ "$status" -eq 0 ]; then
    echo "$change: MISSED, $model passed" >&2
    failed=1
  else
    tail -15 "$log" >&2
    echo "$change: did not build or run" >&2
    failed=1
  fi
done
git -C "$scratch/tree" checkout -q -- .
exit "$failed"
