#!/usr/bin/env bash
# Runs one test binary for `cargo test`, as cargo's runner (scripts/test.sh
# sets it). A binary still running after WORKERID_TEST_BINARY_LIMIT_SECS
# (default 600 s, three times the longest one takes) is stopped once its
# threads' stacks and its processes are printed, and fails the run: a hang
# ends the test command with where it hangs in the log, instead of running
# on until CI's own limit, which keeps no output. A binary that runs 30 s
# or more prints how long it took, so the log shows where the time goes.
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
sleep "$limit" &
sleeper=$!
wait -n -p finished "$test_pid" "$sleeper"
status=$?

if [[ $finished == "$test_pid" ]]; then
  kill "$sleeper" 2>/dev/null
  wait "$sleeper" 2>/dev/null
  elapsed=$((SECONDS - start))
  if ((elapsed >= 30)); then
    echo "test binary $name: ${elapsed} s" >&2
  fi
  exit "$status"
fi

{
  echo
  echo "test binary $name still running after ${limit} s: stopping it."
  echo "Its threads (libtest names each after its test) and where they wait:"
  for task in /proc/"$test_pid"/task/*; do
    echo "  $(cat "$task/comm" 2>/dev/null) ($(cat "$task/wchan" 2>/dev/null))"
  done
  if command -v gdb >/dev/null; then
    echo "Their stacks:"
    timeout 120 gdb -p "$test_pid" -batch -ex 'thread apply all bt' 2>&1 |
      grep -E '^(Thread|#)' | head -n 600
  fi
  echo "Its processes:"
  if command -v pstree >/dev/null; then
    pstree -a -p "$test_pid" | head -n 100
  else
    ps -e -o pid,ppid,stat,etimes,args --forest | head -n 200
  fi
} >&2

# The servers the test kit started die with the binary (their parent-death
# signal).
kill -KILL "$test_pid" 2>/dev/null
wait "$test_pid" 2>/dev/null
echo "test binary $name: stopped after ${limit} s" >&2
exit 124
