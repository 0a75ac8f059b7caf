#!/usr/bin/env bash
# Installs what the tests and CI need beyond the Rust toolchain, on Debian
# (as root, or with sudo): the database servers the tests start themselves
# (on free loopback ports, in temporary directories), protoc, which the
# etcd client's build needs, and iptables, with which the network-fault lab
# (workerid-testkit's netns module) drops packets inside namespaces of its
# own, and Python's gRPC (its stubs generated from the service's .proto by
# grpc_tools, which carries its own compiler) for the test of the gRPC API
# from another language, libfaketime (`faketime`), under which the tests
# step a store server's wall clock, Redis Sentinel, which fails a Redis
# master over to its replica in the failover tests, and e2fsprogs
# (`mkfs.ext4`), with which the failing-disk tests make an ext4 file system
# on a loop device, gdb and procps (`ps`), with which scripts/test-binary.sh
# prints the stacks and processes of a test binary that hangs, iproute2
# (`ip`, `ss`), with which the tests make network namespaces and watch
# sockets, and python3, in which some tests write programs they start.
# Installs only what is missing.
#
# etcd is Debian 13's (trixie, etcd 3.5), fetched and verified by apt with
# the machine's Debian archive keys and unpacked into $ETCD_DIR, without
# adding trixie to the machine's package sources: the tests run the etcd
# release the store recommends, whatever the machine's own Debian ships.
set -euo pipefail

ETCD_DIR=/usr/local/lib/workerid/etcd
ETCD_SUITE=trixie
ETCD_SERIES='etcd Version: 3.5.'

# Debian package -> the command (or path) that shows it is installed.
declare -A needs=(
  [redis-server]=redis-server
  [postgresql]=/usr/lib/postgresql
  [mariadb-server]=mariadbd
  [protobuf-compiler]=protoc
  [iptables]=iptables
  [prometheus]=promtool
  [python3-grpcio]=/usr/lib/python3/dist-packages/grpc
  [python3-grpc-tools]=/usr/lib/python3/dist-packages/grpc_tools
  [faketime]=faketime
  [redis-sentinel]=redis-sentinel
  [e2fsprogs]=mkfs.ext4
  [gdb]=gdb
  [procps]=ps
  [iproute2]=ip
  [python3]=python3
)
missing=()
for pkg in "${!needs[@]}"; do
  probe=${needs[$pkg]}
  if [[ $probe == /* ]]; then [[ -e $probe ]] || missing+=("$pkg")
  else PATH="$PATH:/usr/sbin" command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg"); fi
done
etcd_version() { "$ETCD_DIR/etcd" --version 2>/dev/null | sed -n 1p; }
[[ -x $ETCD_DIR/etcd && $(etcd_version) == "$ETCD_SERIES"* ]] || need_etcd=1
((${#missing[@]})) || [[ -n ${need_etcd:-} ]] || exit 0

if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
work=
policy_rc=
on_exit() {
  [[ -z $work ]] || rm -rf "$work"
  [[ -z $policy_rc ]] || $SUDO rm -f /usr/sbin/policy-rc.d
}
trap on_exit EXIT

# The Debian archive the machine's apt already uses (its own parsing of its
# sources, so disabled entries and other vendors' repositories do not count);
# deb.debian.org when apt has no lists yet.
debian_mirror() {
  local uri
  uri=$(apt-get indextargets --format '$(REPO_URI)' 'Origin: Debian' 'Label: Debian' \
    'Identifier: Packages' 2>/dev/null | sed -n 1p) || true
  echo "${uri:-http://deb.debian.org/debian/}"
}

install_etcd() {
  local opts deb
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/get" "$work/none"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) $ETCD_SUITE main" \
    >"$work/sources.list"
  # Only this source, and none of the machine's pins.
  opts=(-qq -o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
    -o "Dir::Etc::Preferences=$work/none/preferences" -o "Dir::Etc::PreferencesParts=$work/none"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
    -o APT::Sandbox::User=root -o Debug::NoLocking=1 -o Acquire::Languages=none
    -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false)
  echo "installing: etcd-server from Debian $ETCD_SUITE into $ETCD_DIR"
  apt-get "${opts[@]}" --error-on=any update
  (cd "$work/get" && apt-get "${opts[@]}" download "etcd-server/$ETCD_SUITE")
  deb=$(ls "$work"/get/etcd-server_*.deb)
  dpkg-deb -x "$deb" "$work/root"
  $SUDO mkdir -p "$ETCD_DIR"
  $SUDO install -m 0755 "$work/root/usr/bin/etcd" "$ETCD_DIR/etcd.new"
  $SUDO mv "$ETCD_DIR/etcd.new" "$ETCD_DIR/etcd"
  local version
  version=$(etcd_version)
  echo "$version"
  if [[ $version != "$ETCD_SERIES"* ]]; then
    echo "expected etcd 3.5 from Debian $ETCD_SUITE, got: $version" >&2
    exit 1
  fi
}

[[ -z ${need_etcd:-} ]] || install_etcd
((${#missing[@]})) || exit 0

echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
# Packages start their service on install where they can: keep them off the
# default ports (the tests start their own servers). policy-rc.d is Debian's
# switch for that; ours is removed on exit.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  policy_rc=1
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
fi
$SUDO apt-get install -y -qq "${missing[@]}"
