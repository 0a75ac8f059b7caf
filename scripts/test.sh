#!/usr/bin/env bash
# The one test command: installs the servers the tests start (on a fresh
# Debian machine, as root), then runs every test of the workspace.
#   bash scripts/test.sh            # all tests
#   bash scripts/test.sh -p workerid-memory   # extra arguments go to cargo test
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages -> the command each provides. The tests start these servers
# themselves, on free loopback ports in temporary directories.
declare -A needs=(
  [redis-server]=redis-server
  [etcd-server]=etcd
  [postgresql]=/usr/lib/postgresql
  [mariadb-server]=mariadbd
  [protobuf-compiler]=protoc
)
missing=()
for pkg in "${!needs[@]}"; do
  probe=${needs[$pkg]}
  if [[ $probe == /* ]]; then [[ -e $probe ]] || missing+=("$pkg")
  else command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg"); fi
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # Packages start their service on install where they can: keep them off the
  # default ports (the tests start their own servers).
  # (policy-rc.d is Debian's switch for that; ours is removed afterwards.)
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $SUDO apt-get install -y -qq "${missing[@]}"
fi

export PATH="$PATH:/usr/sbin:/usr/lib/postgresql/$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)/bin"
cargo test --workspace "$@"
