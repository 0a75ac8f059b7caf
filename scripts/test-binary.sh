#!/usr/bin/env bash
# Runs one test binary for `cargo test`, as cargo's runner (scripts/test.sh
# sets it). A binary still running after WORKERID_TEST_BINARY_LIMIT_SECS
# (default 600 s, three times the longest one takes) is stopped once its
# threads' stacks (with gdb, which scripts/setup.sh installs) and its
# processes are printed, and fails the run: a hang ends the test command
# with where it hangs in the log, instead of running on until CI's own
# limit, which keeps no output. A binary that runs 30 s or more prints how
# long it took, so the log shows where the time goes.
#   scripts/test-binary.sh BINARY [ARGS...]
set -uo pipefail

limit=${WORKERID_TEST_BINARY_LIMIT_SECS:-600}
name=$(basename "$1")
name=${name%-*[0-9a-f]}  # cargo's hash off: tests/etcd.rs -> etcd
start=$SECONDS

# In the background, so that this script can watch the clock, yet as it
# would run in the foreground: bash would have it ignore SIGINT and SIGQUIT
# (and the servers it starts would inherit that) and read an empty stdin.
env --default-signal=INT,QUIT "$@" <&0 &
test_pid=$!
# Silent and ended with this script, so that it holds no pipe of the
# caller's once the binary is done.
sleep "$limit" </dev/null >/dev/null 2>&1 &
sleeper=$!
trap 'kill "$sleeper" 2>/dev/null' EXIT
wait -n -p finished "$test_pid" "$sleeper"
status=$?
if [[ $finished == "$sleeper" ]]; then
  # Reaped: its pid may be another process's by the time this script exits.
  trap - EXIT
fi

if [[ $finished == "$test_pid" ]]; then
  elapsed=$((SECONDS - start))
  if ((elapsed >= 30)); then
    echo "test binary $name: ${elapsed} s" >&2
  fi
  exit "$status"
fi

# The processes descended from `$1` (its pid), children first.
descendants() {
  local child
  for child in $(ps -o pid= --ppid "$1"); do
    echo "$child"
    descendants "$child"
  done
}

{
  echo
  echo "test binary $name still running after ${limit} s: stopping it."
  echo "Its threads (libtest names each after its test) and where they wait:"
  for task in /proc/"$test_pid"/task/*; do
    echo "  $(cat "$task/comm" 2>/dev/null) ($(cat "$task/wchan" 2>/dev/null))"
  done
  if command -v gdb >/dev/null; then
    echo "Their stacks:"
    # gdb waits for every thread to stop and ignores SIGTERM meanwhile: a
    # thread in an uninterruptible wait (a FUSE request, say) never does.
    # Killed, it detaches, and the binary goes on to be killed below.
    timeout -k 10 120 gdb -p "$test_pid" -batch -ex 'thread apply all bt' </dev/null 2>&1 |
      grep -E '^(Thread|#)|ptrace|[Cc]ould not|denied' | head -n 600
  else
    echo "(no gdb: no stacks)"
  fi
  echo "Its processes:"
  kids=$(descendants "$test_pid" | paste -sd, -)
  ps -o pid,ppid,stat,etimes,args -p "$test_pid${kids:+,$kids}" |
    head -n 100
} >&2

# Every process it started goes with it: the servers the test kit starts
# would die with it (their parent-death signal), but not the other
# programs the tests start.
left=$(descendants "$test_pid")
kill -KILL "$test_pid" $left 2>/dev/null
wait "$test_pid" 2>/dev/null
echo "test binary $name: stopped after ${limit} s" >&2
exit 124
