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

# Builds the operator console (console/ into dist/console, `npm run build:console`) when it was never
# built or what it is built from changed since the last build: console/, the one file of src/ it imports,
# the lock file. Otherwise does nothing.
build_console() {
  local stamp="$project_root/dist/console.built"
  local sources=("$project_root/console" "$project_root/src/domain/events.ts" "$project_root/package-lock.json")
  if [ -f "$stamp" ] && [ -z "$(find "${sources[@]}" -newer "$stamp" -print -quit)" ]; then
    return
  fi
  mkdir -p "$project_root/dist"
  # Stamped with the time the build began, so a file changed during the build triggers the next one.
  touch "$stamp.next"
  (cd "$project_root" && npm run --silent build:console >&2)
  mv "$stamp.next" "$stamp"
}
