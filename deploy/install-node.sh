#!/usr/bin/env bash
# Installs a vpn-panel node agent on a fresh Debian 12 / Ubuntu 24.04 host, as root, and prints the
# `vpn-panel nodes add` command to run on the panel. Run it again to upgrade: the token is kept.
#
#   bash deploy/install-node.sh [--name NAME] [--public-host HOST] [--port PORT] [--source DIR] [--no-systemd]
#   bash deploy/install-node.sh --app-only [--source DIR]
#
#   --name         the node's name on the panel (default: the short host name)
#   --public-host  the address clients and the panel reach this host at (default: its first global IPv4)
#   --port         the agent's HTTPS port (default 7000)
#   --source       the vpn-panel checkout to install (default: the one this script is in)
#   --no-systemd   start `vpn-panel node` directly instead of through deploy/vpn-panel-node.service, with
#                  the unit's capability bounding set and no new privileges (setpriv); the default when
#                  systemd is not running (a chroot, a container). Its pid is in /run/vpn-panel-node.pid,
#                  its log in /var/log/vpn-panel-node.log.
#   --app-only     only the packages, Node.js 24 and the app with `vpn-panel` on the PATH: for a panel's
#                  host, which then installs deploy/vpn-panel.service.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source_dir="$(cd "$here/.." && pwd)"
name="$(hostname -s)"
public_host=""
port=""
use_systemd=auto
app_only=false
die() {
  echo "install-node: $*" >&2
  exit 1
}
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name="${2:?--name needs a value}"; shift 2 ;;
    --public-host) public_host="${2:?--public-host needs a value}"; shift 2 ;;
    --port) port="${2:?--port needs a value}"; shift 2 ;;
    --source) source_dir="$(cd "${2:?--source needs a directory}" && pwd)"; shift 2 ;;
    --no-systemd) use_systemd=no; shift ;;
    --app-only) app_only=true; shift ;;
    *) die "unknown argument '$1' (see the top of $0)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "run it as root"
if [ ! -f "$source_dir/package-lock.json" ] || [ ! -f "$source_dir/bin/vpn-panel.js" ]; then
  die "$source_dir is not a vpn-panel checkout"
fi
if [ "$use_systemd" = auto ]; then
  # sd_booted(3): systemd is the running init.
  if [ -d /run/systemd/system ]; then use_systemd=yes; else use_systemd=no; fi
fi

prefix=/opt/vpn-panel
app="$prefix/app"
env_file=/etc/vpn-panel/node.env
state_dir=/var/lib/vpn-panel-node
unit=vpn-panel-node.service
pid_file=/run/vpn-panel-node.pid

echo "== packages" >&2
bash "$source_dir/scripts/install-packages.sh" node
# The unit may not load modules (no CAP_SYS_MODULE): have the kernel's WireGuard loaded at boot.
if [ -d /sys/module/wireguard ]; then echo wireguard >/etc/modules-load.d/vpn-panel.conf; fi

echo "== Node.js 24 and the app in $prefix" >&2
VPN_PANEL_TOOLS="$prefix"
source "$source_dir/scripts/node24.sh"
mkdir -p "$app" "$prefix/bin"
rm -rf "$app/bin" "$app/src"
rm -rf "$app/console" "$app/dist"
tar -C "$source_dir" -cf - bin src console package.json package-lock.json | tar -C "$app" -xf -
# --ignore-scripts: see scripts/env.sh.
npm_ci=(npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
if $app_only; then
  # A panel serves the operator console: built with the dev dependencies (Vite), which are then removed.
  (cd "$app" && "${npm_ci[@]}" >&2 && npm run --silent build:console >&2 && npm prune --omit=dev --loglevel=error >&2)
else
  (cd "$app" && "${npm_ci[@]}" --omit=dev >&2)
fi
cat >"$prefix/bin/vpn-panel" <<EOF
#!/bin/sh
# Written by deploy/install-node.sh: the vpn-panel CLI on the Node.js it installed.
exec $(command -v node) $app/bin/vpn-panel.js "\$@"
EOF
chmod 0755 "$prefix/bin/vpn-panel"
ln -sf "$prefix/bin/vpn-panel" /usr/local/bin/vpn-panel
if $app_only; then
  echo "installed the app in $app; vpn-panel is on the PATH" >&2
  exit 0
fi

echo "== settings in $env_file" >&2
setting() { if [ -f "$env_file" ]; then sed -n "s/^$1=//p" "$env_file" | tail -n 1; fi; }
token="$(setting AGENT_TOKEN)"
new_token=false
if [ -z "$token" ]; then
  token="$(openssl rand -hex 32)"
  new_token=true
fi
port="${port:-$(setting AGENT_PORT)}"
port="${port:-7000}"
public_host="${public_host:-$(setting PUBLIC_HOST)}"
public_host="${public_host:-$(ip -4 -o addr show scope global | awk '{ split($4, a, "/"); print a[1]; exit }')}"
[ -n "$public_host" ] || die "no global IPv4 address found: give --public-host"
mkdir -p /etc/vpn-panel
(
  umask 077
  cat >"$env_file.new" <<EOF
# vpn-panel node agent settings (deploy/install-node.sh; docs/configuration.md). Root only: the token
# is the key to this node's data plane.
AGENT_TOKEN=$token
AGENT_PORT=$port
PUBLIC_HOST=$public_host
NODE_DRIVER=wireguard
DATA_DIR=$state_dir
EOF
)
mv "$env_file.new" "$env_file"

stop_direct() {
  [ -f "$pid_file" ] || return 0
  local pid
  pid="$(cat "$pid_file")"
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$pid_file"
}
start_direct() {
  stop_direct
  mkdir -p -m 0700 "$state_dir"
  # The unit's capabilities, as setpriv names them: +net_admin,+sys_admin,...
  local caps
  caps="$(sed -n 's/^CapabilityBoundingSet=//p' "$here/$unit" | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd, -)"
  (
    set -a
    source "$env_file"
    exec setsid setpriv --no-new-privs --inh-caps=-all --bounding-set="-all,$caps" -- "$prefix/bin/vpn-panel" node
  ) </dev/null >>/var/log/vpn-panel-node.log 2>&1 &
  echo $! >"$pid_file"
}

echo "== starting the agent" >&2
if [ "$use_systemd" = yes ]; then
  install -m 0644 "$here/$unit" "/etc/systemd/system/$unit"
  systemctl daemon-reload
  systemctl enable "$unit" >/dev/null 2>&1
  systemctl restart "$unit"
  logs="journalctl -u $unit"
else
  start_direct
  logs="/var/log/vpn-panel-node.log"
fi

# Answers over TLS, with the token, with the certificate it made at its first start.
cert="$state_dir/agent-tls-cert.pem"
header="$(mktemp)"
trap 'rm -f "$header"' EXIT
printf 'Authorization: Bearer %s\n' "$token" >"$header"
answered=false
for _ in $(seq 150); do
  if [ -f "$cert" ]; then
    pin="$(openssl x509 -in "$cert" -noout -pubkey | openssl pkey -pubin -outform der |
      openssl dgst -sha256 -binary | base64)"
    if curl --noproxy '*' -fsS --insecure --pinnedpubkey "sha256//$pin" --max-time 2 -o /dev/null \
      -H "@$header" "https://127.0.0.1:$port/v1/status" 2>/dev/null; then
      answered=true
      break
    fi
  fi
  sleep 0.2
done
$answered || die "the agent did not answer on port $port within 30 s; see $logs"
fingerprint="$(openssl x509 -in "$cert" -noout -fingerprint -sha256 | sed 's/.*=//; s/://g')"
case "$public_host" in *:*) url_host="[$public_host]" ;; *) url_host="$public_host" ;; esac
url="https://$url_host:$port"

cat <<EOF

The node agent answers at $url (certificate SHA-256 $fingerprint).
On the panel's machine, add it; the command asks for the node's token (or reads it from standard input):

  vpn-panel nodes add --name $(printf '%q' "$name") --url $url --cert-sha256 $fingerprint

EOF
if $new_token; then
  echo "The node's token, shown only now (root can read it again as AGENT_TOKEN in $env_file):"
  printf '\n  %s\n' "$token"
else
  echo "The node's token is unchanged: AGENT_TOKEN in $env_file (root only)."
fi
