#!/usr/bin/env bash
# Create one virtual environment per peer queue, for the benchmarks only (never runtime deps).
#   benchmarks/peers/setup.sh            -> $FAIRQ_PEER_VENVS/<peer>/ (default ~/.cache/fairq-peers)
# Separate environments because the peers disagree on redis-py: arq >= 0.26 wants redis < 6,
# Celery's kombu wants redis >= 6.4. Each gets the peer, a redis client it accepts, and hiredis.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
ROOT="${FAIRQ_PEER_VENVS:-$HOME/.cache/fairq-peers}"
declare -A PEERS=(
    [rq]="rq>=2.0 hiredis"
    [celery]="celery[redis]>=5.4 hiredis"
    [dramatiq]="dramatiq[redis]>=1.17 hiredis"
    [arq]="arq>=0.26 hiredis"
)
for peer in "${!PEERS[@]}"; do
    venv="$ROOT/$peer"
    if [[ ! -x "$venv/bin/python" ]]; then
        "$PYTHON" -m venv "$venv"
    fi
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet --upgrade pip ${PEERS[$peer]}
    echo "$peer: $("$venv/bin/python" -m pip freeze | grep -iE "^($peer|redis)==" | tr '\n' ' ')"
done
