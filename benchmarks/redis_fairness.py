"""Fairness under a flood, on one Redis: fairq against RQ, Celery, Dramatiq and arq.

One tenant enqueues 20,000 jobs of 5 ms; once the workers are busy, ten small tenants enqueue
20 each. Reported per system: the small tenants' wait (enqueue → start) p50/p99/max, alone on
an idle system and under the flood, and Jain's index of starts per tenant while every tenant
is backlogged (1.0: equal shares; 1/11 ≈ 0.09: one tenant gets everything). Every system runs
8 jobs at once (see each ``peers/<peer>_flood.py``). Waits marked ``>`` hit the deadline.
The measurement itself is ``peers/_flood.py``, the same for all.

    .venv/bin/python benchmarks/redis_fairness.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

from _flood import flood  # noqa: E402
from fairness_jobs import app, stamp  # noqa: E402
from redis_throughput import PEERS, VENVS  # noqa: E402

Figures = dict[str, object]
BATCH = 1000


def fairq_flood(args: argparse.Namespace) -> Figures:
    def send_many(jobs: list[tuple[str, float]]) -> None:
        for at in range(0, len(jobs), BATCH):
            app.enqueue_many(stamp.call(*job) for job in jobs[at : at + BATCH])

    worker = [sys.executable, "-m", "fairq", "worker", "fairness_jobs:app", "--concurrency", "4"]
    return flood(stamp.enqueue, [worker, worker], args, cwd=HERE, send_many=send_many)


def peer_flood(peer: str, args: argparse.Namespace) -> Figures | None:
    python = VENVS / peer / "bin" / "python"
    if not python.exists():
        print(f"  {peer}: no environment at {python.parent.parent}; run benchmarks/peers/setup.sh")
        return None
    flags = [f"--big={args.big}", f"--each={args.each}", f"--deadline={args.deadline}"]
    if args.alone:
        flags.append("--alone")
    out = subprocess.run(
        [str(python), str(HERE / "peers" / f"{peer}_flood.py"), *flags],
        cwd=HERE / "peers", capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: Figures = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--big", type=int, default=20_000)
    parser.add_argument("--each", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--peers", default=",".join(PEERS))
    args = parser.parse_args()
    rows: list[tuple[str, Figures, Figures]] = []
    for name in ["fairq", *filter(None, args.peers.split(","))]:
        found = []
        for alone in (True, False):
            print(f"{name}: {'alone' if alone else 'under the flood'}", file=sys.stderr)
            run = argparse.Namespace(**{**vars(args), "alone": alone})
            found.append(fairq_flood(run) if name == "fairq" else peer_flood(name, run))
        if found[0] is not None and found[1] is not None:
            rows.append((name, found[0], found[1]))
    _print_table(rows, args)


KEYS = ("small_p50_ms", "small_p99_ms", "small_max_ms")


def _ms(figures: Figures, key: str) -> str:
    value = float(figures[key])  # type: ignore[arg-type]
    censored = figures["censored_at"][KEYS.index(key)]  # type: ignore[index]
    mark = ">" if censored else ""
    return f"{mark}{value:,.0f}" if value >= 10 else f"{mark}{value:.1f}"


def _print_table(rows: list[tuple[str, Figures, Figures]], args: argparse.Namespace) -> None:
    print(f"\none tenant floods {args.big:,} jobs of 5 ms, then 10 small tenants enqueue "
          f"{args.each} each; 8 jobs at once per system\n")  # fmt: skip
    print("| system | small p50 alone (ms) | small p99 alone (ms) | small p50 flood (ms) "
          "| small p99 flood (ms) | small max flood (ms) | Jain while backlogged |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, alone, flooded in rows:
        jain = flooded["jain"]
        print(f"| {name} | {_ms(alone, 'small_p50_ms')} | {_ms(alone, 'small_p99_ms')} "
              f"| {_ms(flooded, 'small_p50_ms')} | {_ms(flooded, 'small_p99_ms')} "
              f"| {_ms(flooded, 'small_max_ms')} "
              f"| {'n/a' if jain is None else f'{float(jain):.2f}'} |")  # type: ignore[arg-type]  # fmt: skip


if __name__ == "__main__":
    main()
