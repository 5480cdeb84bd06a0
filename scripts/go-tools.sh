#!/usr/bin/env bash
# Builds the userspace WireGuard implementations a node runs, at pinned versions, from their Go modules
# through the Go module proxy, and installs them as /usr/local/bin/wireguard-go and /usr/local/bin/amneziawg-go
# (links to /usr/local/lib/vpn-panel/NAME-VERSION, so a run finds an installed pin by its name and skips it).
# /usr/local/bin comes before /usr/bin on Debian's PATH and systemd's, so the agent runs these rather than
# Debian's older wireguard-go package, which stays the fallback. Used by scripts/install-packages.sh
# (groups dataplane, node, ci), hence by scripts/start, deploy/install-node.sh and .ci/run.
#
#   bash scripts/go-tools.sh            builds what is missing (root; needs the `go` command)
#
# Without a Go toolchain new enough, or without root, it says in one line what AmneziaWG needs and exits 0:
# WireGuard servers keep working on the kernel module or Debian's wireguard-go.
set -uo pipefail

# NAME MODULE VERSION: wireguard-go's current tree has its TUN offloads (segmentation and UDP GSO/GRO), which
# Debian 12's v0.0.20220316 predates; amneziawg-go v0.2.16 speaks AmneziaWG 2.0 (header ranges, i1-i5).
tools=(
  "wireguard-go golang.zx2c4.com/wireguard v0.0.0-20260522210424-ecfc5a8d5446"
  "amneziawg-go github.com/amnezia-vpn/amneziawg-go v0.2.16"
)
lib=/usr/local/lib/vpn-panel
bin=/usr/local/bin

say() { echo "go-tools: $*" >&2; }

# The `go` directive of a module's go.mod against the toolchain's version, as dotted numbers.
go_new_enough() {
  local need have
  need="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$1/go.mod")"
  have="$(go env GOVERSION | sed 's/^go//')"
  [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" = "$need" ] || {
    say "$2 needs Go $need or newer, this machine has $have"
    return 1
  }
}

build() {
  local name="$1" module="$2" version="$3" target="$lib/$1-$3" dir
  if [ -x "$target" ] && [ "$(readlink "$bin/$name")" = "$target" ]; then return 0; fi
  # Some modules' version lists are refused by the proxy, so the version is always named exactly.
  dir="$(GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "$module@$version" 2>/dev/null |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -n "$dir" ] || { say "cannot download $module@$version through the Go module proxy"; return 1; }
  go_new_enough "$dir" "$name" || return 1
  say "building $name from $module@$version"
  mkdir -p "$lib"
  (cd "$dir" && GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$target.tmp" .) || {
    say "building $name failed"
    rm -f "$target.tmp"
    return 1
  }
  mv -f "$target.tmp" "$target"
  ln -sfn "$target" "$bin/$name"
}

lacks() {
  say "$1; AmneziaWG servers need amneziawg-go (the node then reports only wireguard), and WireGuard runs on" \
    "the kernel module or Debian's wireguard-go: see README.md, \"AmneziaWG servers\""
  exit 0
}
[ "$(id -u)" -eq 0 ] || lacks "not root: nothing installed"
command -v go >/dev/null || lacks "no \`go\` command (Go 1.24 or newer builds them)"
failed=0
for tool in "${tools[@]}"; do
  # shellcheck disable=SC2086 # each entry is three words
  build $tool || failed=1
done
[ "$failed" -eq 0 ] || lacks "not every tool was built"
