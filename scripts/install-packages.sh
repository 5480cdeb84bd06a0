#!/usr/bin/env bash
# The one list of the Debian packages vpn-panel needs, and how they are installed. Used by scripts/start,
# deploy/install-node.sh and .ci/run.
#
#   bash scripts/install-packages.sh GROUP...            installs the missing ones (root on Debian/Ubuntu)
#   bash scripts/install-packages.sh --missing GROUP...  prints the missing ones and changes nothing
#
# Groups: dataplane (what a node's `wireguard` driver runs: ip, sysctl, wg, nft, and wireguard-go unless the
# kernel's wireguard module loads), build (npm, which fetches Node.js 24 and the dependencies), node
# (both, and what install-node.sh uses: openssl, curl), services (the PostgreSQL and Redis servers the
# test suite uses; scripts/test-services.sh starts them), ci (the test suite's tools: wireguard-go
# always, since the end-to-end tests drive it, the services, and the rest). dataplane (so node and ci) also
# builds the pinned wireguard-go and amneziawg-go from their Go modules (scripts/go-tools.sh); ci also
# installs the pinned Python tools (schemathesis) from PyPI into virtual environments (scripts/python-tools.sh)
# and the SDKs' generators and test tools (scripts/sdk-tools.sh).
set -euo pipefail
# Non-root shells on Debian lack the sbin directories, where nft and modprobe live.
export PATH="$PATH:/usr/sbin:/sbin"

missing=()
go_tools=false
sdk_tools=false
python_tools=false
need() {
  command -v "$1" >/dev/null 2>&1 && return
  [[ " ${missing[*]} " == *" $2 "* ]] || missing+=("$2")
}
# Loading the module (as root) is also what lets a node run without CAP_SYS_MODULE later.
kernel_wireguard() {
  [ -d /sys/module/wireguard ] && return
  if [ "$(id -u)" -eq 0 ]; then modprobe -q wireguard 2>/dev/null; else modprobe -n -q wireguard 2>/dev/null; fi
}

dataplane() {
  need ip iproute2
  need sysctl procps
  need wg wireguard-tools
  need nft nftables
  kernel_wireguard || need wireguard-go wireguard-go
  go_tools=true
}
build() {
  need npm npm
}
node() {
  dataplane
  build
  need openssl openssl
  need curl curl
  [ -f /etc/ssl/certs/ca-certificates.crt ] || need update-ca-certificates ca-certificates
}
# A PostgreSQL server is a versioned binary under /usr/lib/postgresql, not a command on PATH.
services() {
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need postgres postgresql
  need pg_ctlcluster postgresql
  need redis-server redis-server
}
ci() {
  dataplane
  build
  services
  need wireguard-go wireguard-go
  need ping iputils-ping
  need iperf3 iperf3
  need psql postgresql-client
  need redis-cli redis-tools
  need zbarimg zbar-tools
  need chromium chromium
  need openssl openssl
  need debootstrap debootstrap
  need systemd-analyze systemd
  need tshark tshark
  need faketime faketime
  /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need python3-venv python3-venv
  python_tools=true
  sdk_tools=true # the SDKs' generators and test tools (scripts/sdk-tools.sh), after the packages
}

only_list=false
if [ "${1:-}" = --missing ]; then
  only_list=true
  shift
fi
[ $# -gt 0 ] || { echo "usage: $0 [--missing] dataplane|build|node|services|ci..." >&2; exit 2; }
for group in "$@"; do
  case "$group" in
    dataplane | build | node | services | ci) "$group" ;;
    *) echo "$0: unknown group '$group'" >&2; exit 2 ;;
  esac
done

if $only_list; then
  echo "${missing[*]}"
  exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "vpn-panel: missing ${missing[*]}; install them as root (Debian/Ubuntu: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if $go_tools; then bash "$(dirname "${BASH_SOURCE[0]}")/go-tools.sh"; fi
if $python_tools; then bash "$(dirname "${BASH_SOURCE[0]}")/python-tools.sh"; fi
if $sdk_tools; then bash "$(dirname "${BASH_SOURCE[0]}")/sdk-tools.sh" --required; fi
