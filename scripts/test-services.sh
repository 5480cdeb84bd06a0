#!/usr/bin/env bash
# Makes sure the servers the test suite uses answer: PostgreSQL on 127.0.0.1:5432 (user `postgres`
# trusted on loopback, database `test`) and Redis on 127.0.0.1:6379. A server that answers is left as
# it is. One that does not is installed when missing (root on Debian/Ubuntu, scripts/install-packages.sh
# services) and started: the machine's PostgreSQL cluster, made if there is none, with two trust lines
# for `postgres` on loopback put first in its pg_hba.conf; Redis in memory only. Sourced or run by
# scripts/test and .ci/run; without root it says what is missing and leaves the tests to report it.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
here="$(dirname "${BASH_SOURCE[0]}")"

postgres_answers() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
redis_answers() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
as_postgres() { (cd / && runuser -u postgres -- "$@"); }

start_postgres() {
  local version cluster hba
  version="$(ls /usr/lib/postgresql | sort -n | tail -1)"
  if [ -z "$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"')" ]; then
    pg_createcluster --port 5432 "$version" main >/dev/null
  fi
  cluster="/etc/postgresql/$version/main"
  hba="$cluster/pg_hba.conf"
  if ! grep -q '^# vpn-panel tests' "$hba"; then
    { printf '# vpn-panel tests: postgres trusted on loopback\n'
      printf 'host all postgres 127.0.0.1/32 trust\nhost all postgres ::1/128 trust\n'
      cat "$hba"; } >"$hba.new"
    chown postgres:postgres "$hba.new"
    chmod 640 "$hba.new"
    mv "$hba.new" "$hba"
  fi
  if [ "$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { print $4 }')" = online ]; then
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  else
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
  fi
  for _ in $(seq 1 100); do postgres_answers && break; sleep 0.1; done
}

ensure_test_services() {
  if postgres_answers && redis_answers; then
    ensure_test_database
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "vpn-panel: PostgreSQL on 127.0.0.1:5432 or Redis on 127.0.0.1:6379 does not answer; as root, scripts/test starts them" >&2
    return
  fi
  bash "$here/install-packages.sh" services
  postgres_answers || start_postgres
  redis_answers || redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 100); do redis_answers && break; sleep 0.1; done
  ensure_test_database
}

ensure_test_database() {
  postgres_answers || return 0
  local found
  if ! found="$(psql -h 127.0.0.1 -U postgres -d postgres -w -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'")"; then
    echo "vpn-panel: PostgreSQL answers but does not let user postgres in from 127.0.0.1 without a password" >&2
    return 0
  fi
  [ "$found" = 1 ] || psql -h 127.0.0.1 -U postgres -d postgres -w -qc 'CREATE DATABASE test'
}

ensure_test_services
