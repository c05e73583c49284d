#!/usr/bin/env bash
# Creates benchmarks/peers_pg/.venv with the PostgreSQL peer queues the benchmarks compare
# against (pgqueuer, procrastinate) and fairq itself. Benchmark-only: fairq never imports them.
#   bash benchmarks/peers_pg/setup.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3.11}"
"$python" -m venv "$here/.venv"
"$here/.venv/bin/pip" install --quiet --upgrade pip
"$here/.venv/bin/pip" install --quiet -r "$here/requirements.txt"
"$here/.venv/bin/pip" install --quiet -e "$root[postgres]"
"$here/.venv/bin/python" - <<'PY'
import importlib.metadata as m
for name in ("pgqueuer", "procrastinate", "psycopg", "fairq"):
    print(f"{name} {m.version(name)}")
PY
