#!/usr/bin/env bash
# schemathesis against a real `srift serve` (fresh data folder, shipped data, a write token), every check on,
# every phase (examples, coverage, fuzzing, stateful: the schema's links), N examples per operation. Positive
# cases keep to the rules across fields the schema publishes under x-srift-rules (tests/fuzz/st_hooks.py).
# Usage: scripts/fuzz_live.sh [N] [PORT]   (default 30, 8648; the report goes to var/fuzz-live/)
set -euo pipefail
N=${1:-30}
PORT=${2:-8648}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=$(mktemp -d)
OUT="$ROOT/var/fuzz-live"
mkdir -p "$OUT"
export SRIFT_DATA_DIR="$DATA" SRIFT_PORT="$PORT" SRIFT_WORKERS=1 SRIFT_MAX_SOLVE_BUDGET_S=2
unset SRIFT_DATABASE_URL
"$ROOT/.venv/bin/srift" serve > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'rc=$?; kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true; rm -rf "$DATA"; exit $rc' EXIT
until curl -sf "http://127.0.0.1:$PORT/v1/health" > /dev/null; do
  kill -0 $SERVER 2>/dev/null || { echo "srift serve exited; see $OUT/serve.log" >&2; exit 1; }
  sleep 1
done
TOKEN=$("$ROOT/.venv/bin/srift" tokens create --name fuzz-live --scope write | tail -n 1)
cd "$ROOT"
SCHEMATHESIS_HOOKS=tests.fuzz.st_hooks "$ROOT/.venv/bin/st" run "http://127.0.0.1:$PORT/openapi.json" --checks all -n "$N" \
  -H "Authorization: Bearer $TOKEN" --max-failures 500 --no-color \
  --report junit --report-dir "$OUT" | tee "$OUT/st.txt"
