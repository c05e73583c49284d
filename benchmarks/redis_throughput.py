"""Throughput on one Redis: fairq against RQ, Celery, Dramatiq and arq, measured in one run.

N no-op jobs over 10 tenants are enqueued (one call per job, and for fairq also in batches of
1,000), then drained by two worker processes per system. Each figure is the median of
``--runs`` runs. Peers run from their own virtual environments (benchmarks/peers/setup.sh).

    .venv/bin/python benchmarks/redis_throughput.py --n 20000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

from _drive import measure  # noqa: E402
from redis_jobs import app, noop  # noqa: E402

from fairq.app import JobDefinition  # noqa: E402

PEERS = ("rq", "celery", "dramatiq", "arq")
VENVS = Path(os.environ.get("FAIRQ_PEER_VENVS", Path.home() / ".cache" / "fairq-peers"))
BATCH = 1000


def fairq_enqueue(n: int) -> None:
    for i in range(n):
        noop.enqueue(f"t{i % 10}")


def fairq_enqueue_batched(n: int, job: JobDefinition[..., None] = noop) -> None:
    for start in range(0, n, BATCH):
        app.enqueue_many(job.call(f"t{i % 10}") for i in range(start, min(n, start + BATCH)))


def fairq_run(n: int, batched: bool, concurrency: int) -> dict[str, float]:
    worker = [sys.executable, "-m", "fairq", "worker", "redis_jobs:app",
              "--concurrency", str(concurrency)]  # fmt: skip
    app.publish()
    enqueue = fairq_enqueue_batched if batched else fairq_enqueue
    return measure(n, lambda k: (app.publish(), enqueue(k))[1], [worker, worker], cwd=HERE)


def peer_run(peer: str, n: int) -> dict[str, float] | None:
    python = VENVS / peer / "bin" / "python"
    if not python.exists():
        print(f"  {peer}: no environment at {python.parent.parent}; run benchmarks/peers/setup.sh")
        return None
    out = subprocess.run(
        [str(python), str(HERE / "peers" / f"{peer}_bench.py"), str(n)],
        cwd=HERE / "peers", capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=16,
        help="fairq jobs in flight per process (Dramatiq's default holds 16: 8 threads, "
        "prefetching twice that)",
    )
    parser.add_argument("--peers", default=",".join(PEERS))
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {}
    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs}", file=sys.stderr)
        results.setdefault("fairq", []).append(fairq_run(args.n, False, args.concurrency))
        results.setdefault("fairq (batch enqueue)", []).append(
            fairq_run(args.n, True, args.concurrency)
        )
        for peer in filter(None, args.peers.split(",")):
            found = peer_run(peer, args.n)
            if found is not None:
                results.setdefault(peer, []).append(found)
    _print_table(results, args.n, args.runs)


def _print_table(results: dict[str, list[dict[str, float]]], n: int, runs: int) -> None:
    ours = median(results["fairq"], "drain_per_s")
    ours_in = median(results["fairq"], "enqueue_per_s")
    print(f"\n{n} no-op jobs, 10 tenants, 2 worker processes; median of {runs} runs\n")
    print("| system | enqueue jobs/s | drain jobs/s | fairq enqueue ratio | fairq drain ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, found in results.items():
        enq, drain = median(found, "enqueue_per_s"), median(found, "drain_per_s")
        ratios = f"{ours_in / enq:.2f}x | {ours / drain:.2f}x"
        print(f"| {name} | {enq:,.0f} | {drain:,.0f} | {ratios} |")


if __name__ == "__main__":
    main()
