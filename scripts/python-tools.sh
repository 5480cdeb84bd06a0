#!/usr/bin/env bash
# Installs the test suite's Python tools at pinned versions from PyPI, each in its own virtual environment
# /usr/local/lib/vpn-panel/NAME-VERSION with a link /usr/local/lib/vpn-panel/NAME to it, so a run finds an
# installed pin by its name and skips it, and a test finds the tool at one path whatever its version. Debian's
# python3 makes them (python3-venv, installed by the `ci` group of scripts/install-packages.sh), not another
# Python on PATH, so the environment does not depend on the shell it was made from. Used by
# scripts/install-packages.sh (group ci), hence by .ci/run.
#
#   bash scripts/python-tools.sh        installs what is missing (root)
#
# Without root or Python it says so in one line and exits 0: test/fuzz/schemathesis.test.ts then skips,
# except in CI (CI=true), where a missing fuzzer fails it.
set -uo pipefail

# NAME VERSION: schemathesis fuzzes the served OpenAPI document (test/fuzz/schemathesis.test.ts).
tools=(
  "schemathesis 4.32.5"
)
lib=/usr/local/lib/vpn-panel
python=/usr/bin/python3

say() { echo "python-tools: $*" >&2; }

install() {
  local name="$1" version="$2" target="$lib/$1-$2"
  if [ -x "$target/bin/$name" ] && [ "$(readlink "$lib/$name")" = "$target" ]; then return 0; fi
  say "installing $name $version from PyPI into $target"
  # A virtual environment is not relocatable: made in place, removed whole when any step fails.
  rm -rf "$target"
  mkdir -p "$lib"
  if ! "$python" -m venv "$target" || ! "$target/bin/pip" install -q --disable-pip-version-check "$name==$version"; then
    say "installing $name $version failed"
    rm -rf "$target"
    return 1
  fi
  ln -sfn "$target" "$lib/$name"
}

[ "$(id -u)" -eq 0 ] || { say "not root: nothing installed (the fuzz test skips outside CI)"; exit 0; }
"$python" -c 'import ensurepip, venv' 2>/dev/null || {
  say "no $python with venv (Debian: python3-venv): nothing installed (the fuzz test skips outside CI)"
  exit 0
}
failed=0
for tool in "${tools[@]}"; do
  # shellcheck disable=SC2086 # each entry is two words
  install $tool || failed=1
done
[ "$failed" -eq 0 ] || say "not every tool was installed (the fuzz test skips outside CI)"
