#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL server for the test suite (Debian's packages; run as root or postgres).
# Usage: scripts/pg.sh start|stop|url   (SRIFT_PG_DIR, SRIFT_PG_PORT, SRIFT_PG_FSYNC choose another server)
set -euo pipefail
PORT=${SRIFT_PG_PORT:-55432}
# One folder per port unless SRIFT_PG_DIR says otherwise: a second server on another port must not find the
# first one's folder running and print its own (wrong) URL.
DIR=${SRIFT_PG_DIR:-/tmp/srift-pg${SRIFT_PG_PORT:+-$SRIFT_PG_PORT}}
FSYNC=${SRIFT_PG_FSYNC:-off}   # off for tests (speed); benchmarks start their own server with on
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
URL="postgresql+psycopg://postgres@127.0.0.1:${PORT}/postgres"

as_pg() {
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi
}

case "${1:-}" in
  start)
    [ -n "$PGBIN" ] || { echo "PostgreSQL binaries not found: install Debian's postgresql package (make system-deps)" >&2; exit 1; }
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$DIR"
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
      as_pg "$PGBIN/initdb -D '$DIR/data' -A trust -U postgres --no-sync >'$DIR/initdb.log' 2>&1"
    fi
    if ! as_pg "$PGBIN/pg_ctl -D '$DIR/data' status" >/dev/null 2>&1; then
      as_pg "$PGBIN/pg_ctl -D '$DIR/data' -l '$DIR/server.log' -w -t 60 \
        -o \"-p $PORT -k '$DIR' -c listen_addresses=127.0.0.1 -c fsync=$FSYNC -c max_connections=200\" start" >/dev/null
    fi
    echo "$URL"
    ;;
  stop)
    [ -n "$PGBIN" ] && [ -f "$DIR/data/PG_VERSION" ] && as_pg "$PGBIN/pg_ctl -D '$DIR/data' -m fast -w stop" >/dev/null 2>&1 || true
    ;;
  url)
    echo "$URL"
    ;;
  *)
    echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
