#!/usr/bin/env bash
# Installs what the tests and CI need beyond the Rust toolchain, on Debian
# (as root, or with sudo): the database servers the tests start themselves
# (on free loopback ports, in temporary directories) and protoc, which the
# etcd client's build needs. Installs only what is missing.
#
# etcd is Debian stable's (trixie, etcd 3.5), fetched and verified by apt
# with the machine's Debian archive keys and unpacked into $ETCD_DIR, without
# adding trixie to the machine's package sources: the tests run the etcd
# release the store recommends, whatever the machine's own Debian ships.
set -euo pipefail

ETCD_DIR=/usr/local/lib/workerid/etcd
ETCD_SUITE=trixie

# Debian package -> the command (or path) that shows it is installed.
declare -A needs=(
  [redis-server]=redis-server
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
[[ -x $ETCD_DIR/etcd ]] || need_etcd=1
((${#missing[@]})) || [[ -n ${need_etcd:-} ]] || exit 0

if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive

# The Debian archive the machine already uses (deb.debian.org if none).
debian_mirror() {
  local uri
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
    grep -oE 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ') || true
  echo "${uri:-http://deb.debian.org/debian}"
}

install_etcd() {
  local work opts deb
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/get"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) $ETCD_SUITE main" \
    >"$work/sources.list"
  opts=(-qq -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
    -o APT::Sandbox::User=root -o Debug::NoLocking=1 -o Acquire::Languages=none
    -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false)
  echo "installing: etcd-server from Debian $ETCD_SUITE into $ETCD_DIR"
  apt-get "${opts[@]}" update
  (cd "$work/get" && apt-get "${opts[@]}" download etcd-server)
  deb=$(ls "$work"/get/etcd-server_*.deb)
  dpkg-deb -x "$deb" "$work/root"
  $SUDO mkdir -p "$ETCD_DIR"
  $SUDO install -m 0755 "$work/root/usr/bin/etcd" "$ETCD_DIR/etcd.new"
  $SUDO mv "$ETCD_DIR/etcd.new" "$ETCD_DIR/etcd"
  rm -rf "$work"
  "$ETCD_DIR/etcd" --version | head -1
}

[[ -z ${need_etcd:-} ]] || install_etcd
((${#missing[@]})) || exit 0

echo "installing: ${missing[*]}"
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
