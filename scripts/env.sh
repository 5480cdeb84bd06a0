# Sourced by the project's scripts: Node.js 24 first on PATH (scripts/node24.sh), then the dependencies
# installed when the lock file changed since the last install. No dependency needs an install script
# (better-sqlite3 ships its binaries), and an older npm (Debian's 9.x) would try to build better-sqlite3
# with node-gyp without them: --ignore-scripts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/node24.sh"
project_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$project_root/node_modules/.package-lock.json" ] || [ "$project_root/package-lock.json" -nt "$project_root/node_modules/.package-lock.json" ]; then
  (cd "$project_root" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
fi
