#!/usr/bin/env bash
# Makes what the SDKs' generators and tests use: sdk/python/.venv with the pinned generator of the Python SDK's
# types (datamodel-code-generator) and pytest, from PyPI through pip; and, where there is a `go` command, the Go
# SDK's generator pinned in sdk/tools/generate.ts (oapi-codegen) built into Go's cache through the Go module proxy,
# so regenerating needs no download later. Called by the `ci` group of scripts/install-packages.sh; run by hand
# after a change of the pins.
#
#   bash scripts/sdk-tools.sh [--required]   makes or updates the venv (needs python3 with venv)
#
# Without python3 (and its venv module) it says so and exits 0, and the Python SDK's tests skip; with --required
# (the ci group, so CI) it exits 1.
set -euo pipefail

pins=(datamodel-code-generator==0.89.0 pytest==9.0.3)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/sdk/python/.venv"

required=false
if [ "${1:-}" = --required ]; then required=true; fi

say() { echo "sdk-tools: $*" >&2; }
lacks() {
  say "$1: the Python SDK cannot be generated or tested"
  if [ "$required" = true ]; then exit 1; fi
  exit 0
}

command -v python3 >/dev/null || lacks "no python3"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" 2>/dev/null || { rm -rf "$venv"; lacks "python3 cannot make a venv (Debian: python3-venv)"; }
fi
stamp="$venv/.pins"
if [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
  echo "${pins[*]}" >"$stamp"
fi

oapi_codegen="$(sed -n "s/^const OAPI_CODEGEN = '\(.*\)';$/\1/p" "$root/sdk/tools/generate.ts")"
if command -v go >/dev/null && [ -n "$oapi_codegen" ]; then
  (cd "$root/sdk/go" && GOFLAGS=-mod=mod go run "$oapi_codegen" -version >/dev/null) || say "cannot build $oapi_codegen"
fi
