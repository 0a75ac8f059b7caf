#!/usr/bin/env bash
# Installs what the tests and CI need beyond the Rust toolchain, on Debian
# (as root, or with sudo): the database servers the tests start themselves
# (on free loopback ports, in temporary directories) and protoc, which the
# etcd client's build needs. Installs only what is missing.
set -euo pipefail

# Debian package -> the command (or path) that shows it is installed.
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
  else PATH="$PATH:/usr/sbin" command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg"); fi
done
((${#missing[@]})) || exit 0

echo "installing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Packages start their service on install where they can: keep them off the
# default ports (the tests start their own servers). policy-rc.d is Debian's
# switch for that; ours is removed afterwards.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq "${missing[@]}"
