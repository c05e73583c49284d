"""Chaos run: SIGKILL real ``fairq worker`` processes mid-run and check that nothing is lost.

Enqueues jobs for a greedy tenant, small tenants and one tenant capped at ``--cap`` running
jobs, starts ``--processes`` workers, SIGKILLs a random one ``--kills`` times at random moments
(seeded) and restarts it, until every job is succeeded or dead (or ``--timeout``), then stops the
rest with SIGTERM. The jobs log their start and end to a shared file (``chaos_jobs.py``); the
figures come from that log, the store's job states and counters, and the workers' logs.

    .venv/bin/python benchmarks/chaos.py
    .venv/bin/python benchmarks/chaos.py --url 'redis://127.0.0.1:6379/15?prefix=chaos'
    .venv/bin/python benchmarks/chaos.py --url 'postgresql://postgres@127.0.0.1:5432/test?schema=chaos'

Everything it starts is killed in a ``finally``, and its store namespace (the temp SQLite file,
the Redis key prefix, the PostgreSQL schema) is deleted at the end: never point it at data you
keep. Exit code 0 when no job is lost, no cap was exceeded and every SIGTERM exit was 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chaos_jobs import EVENTS_ENV, JOB_NAME, LEASE_ENV, make_app  # noqa: E402

from fairq import App  # noqa: E402
from fairq.contract import GetJobsParams  # noqa: E402
from fairq.job import JobState  # noqa: E402

QUEUE = "default"
GREEDY, CAPPED = "greedy", "capped"
SMALL = [f"small-{i}" for i in range(1, 5)]
TOP_UP = 20  # ready jobs each small tenant keeps until the last kill


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Run:
    """What the driver did and saw, for the analysis."""

    kills: list[tuple[int, float]] = field(default_factory=list)  # (pid, monotonic)
    term_codes: list[int | None] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    timed_out: bool = False
    seconds: float = 0.0


def main() -> int:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="fairq-chaos-"))
    url = args.url or f"sqlite:///{work / 'chaos.db'}"
    events = work / "events.jsonl"
    os.environ[EVENTS_ENV] = str(events)
    os.environ[LEASE_ENV] = str(args.lease)
    app = make_app(url, args.lease)
    workers: list[Worker] = []
    try:
        tags = enqueue(app, args)
        run = drive(app, tags, url, args, workers, events, work)
        report = analyse(app, args, tags, run, events)
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
        app.close()
        clean_up(url, work)
    show(report, url, args)
    ok = report["lost"] == 0 and report["over_cap"] <= args.cap and report["term_ok"]
    return 0 if ok else 1


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="The store namespace is deleted at the end (temp SQLite file, Redis prefix, "
        "PostgreSQL schema).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--url", help="store: sqlite:///…, redis://…?prefix=P, postgresql://…?schema=S"
                   " (default: a temp SQLite file)")  # fmt: skip
    p.add_argument("--jobs", type=int, default=25_000, help="jobs to enqueue")
    p.add_argument("--kills", type=int, default=20, help="SIGKILLs during the run")
    p.add_argument("--lease", type=float, default=5.0, help="the job's lease, seconds")
    p.add_argument("--processes", type=int, default=4, help="worker processes")
    p.add_argument("--concurrency", type=int, default=4, help="jobs per worker process")
    p.add_argument("--job-ms", type=float, default=3.0, help="how long each job works, ms")
    p.add_argument("--cap", type=int, default=2, help=f"max_running of tenant {CAPPED!r}")
    p.add_argument("--seed", type=int, default=1, help="seed of the jobs' order and the kills")
    p.add_argument("--timeout", type=float, default=240.0, help="hard bound on the run, seconds")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args()
    if args.jobs < 1 or args.kills < 0 or args.processes < 1 or args.cap < 1:
        p.error("--jobs, --processes and --cap must be >= 1, --kills >= 0")
    return args


def enqueue(app: App, args: argparse.Namespace) -> dict[int, tuple[str, str]]:
    """Greedy 80 %, four small tenants 15 %, the capped tenant 5 %, in a seeded random order."""
    app.publish()
    app.set_tenant(QUEUE, CAPPED, max_running=args.cap)
    rng = random.Random(args.seed)
    n_capped = max(1, args.jobs // 20)
    n_small = max(len(SMALL), args.jobs * 3 // 20)
    tenants = [CAPPED] * n_capped + [SMALL[i % len(SMALL)] for i in range(n_small)]
    tenants = [GREEDY] * max(0, args.jobs - len(tenants)) + tenants
    rng.shuffle(tenants)
    tags: dict[int, tuple[str, str]] = {}  # tag -> (job id, tenant)
    add(app, tags, tenants, args.job_ms)
    return tags


def add(app: App, tags: dict[int, tuple[str, str]], tenants: list[str], job_ms: float) -> None:
    """Enqueue one job per entry of ``tenants``, tagged from ``len(tags)`` on."""
    job = app.jobs[JOB_NAME]
    for start in range(0, len(tenants), 1000):
        chunk = list(enumerate(tenants[start : start + 1000], len(tags)))
        calls = [job.call(t, tag, job_ms) for tag, t in chunk]
        for (tag, t), job_id in zip(chunk, app.enqueue_many(calls), strict=True):
            tags[tag] = (job_id, t)


def top_up(app: App, tags: dict[int, tuple[str, str]], job_ms: float) -> None:
    """Keep every small tenant backlogged, so a tenant overcharged for a crash would wait."""
    ready = {s.tenant: s.ready for s in app.stats(QUEUE)}
    add(app, tags, [t for t in SMALL for _ in range(max(0, TOP_UP - ready.get(t, 0)))], job_ms)


def drive(
    app: App,
    tags: dict[int, tuple[str, str]],
    url: str,
    args: argparse.Namespace,
    workers: list[Worker],
    events: Path,
    work: Path,
) -> Run:
    """Start the workers; kill one at each seeded progress mark; stop the rest at the end."""
    rng = random.Random(args.seed + 1)
    marks = sorted(rng.uniform(0.02, 0.9) * args.jobs for _ in range(args.kills))
    run = Run()
    began = time.monotonic()
    deadline = began + args.timeout
    for _ in range(args.processes):
        workers.append(start_worker(url, args, work, len(run.logs)))
        run.logs.append(workers[-1].log)
    ends, offset = 0, 0
    while True:
        ends, offset = count_ends(events, ends, offset)
        if marks and ends >= marks[0]:
            marks.pop(0)
            time.sleep(rng.uniform(0, 0.05))  # a random moment inside a job's run
            i = rng.randrange(len(workers))
            victim = workers[i].proc
            victim.send_signal(signal.SIGKILL)
            run.kills.append((victim.pid, time.monotonic()))
            victim.wait()
            workers[i] = start_worker(url, args, work, len(run.logs))
            run.logs.append(workers[i].log)
            continue
        if marks:
            top_up(app, tags, args.job_ms)
        elif finished(app):
            break
        if time.monotonic() > deadline:
            run.timed_out = True
            break
        time.sleep(0.05)
    run.seconds = time.monotonic() - began
    for w in workers:
        # A worker restarted a moment ago may still be importing Python: no program can
        # handle a signal before its interpreter runs its code. SIGTERM the workers once up.
        up_by = time.monotonic() + 30
        while " started: " not in _read(w.log) and w.proc.poll() is None:
            if time.monotonic() > up_by:
                break
            time.sleep(0.02)
    for w in workers:
        w.proc.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            run.term_codes.append(w.proc.wait(timeout=max(1.0, deadline + 20 - time.monotonic())))
        except subprocess.TimeoutExpired:
            run.term_codes.append(None)  # killed in main's finally
    return run


def _read(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


def start_worker(url: str, args: argparse.Namespace, work: Path, n: int) -> Worker:
    log = work / f"worker-{n}.log"
    command = [
        sys.executable, "-m", "fairq", "--log-level", "info", "worker", "chaos_jobs:app",
        "--url", url, "--concurrency", str(args.concurrency), "--grace-period", "10",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=HERE,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "FAIRQ_URL": url},
        )
    return Worker(proc, log)


def count_ends(events: Path, ends: int, offset: int) -> tuple[int, int]:
    """Count the ``end`` lines appended since ``offset`` (whole lines only)."""
    try:
        with events.open("rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return ends, offset
    whole = chunk[: chunk.rfind(b"\n") + 1]
    return ends + whole.count(b'"e": "end"'), offset + len(whole)


def finished(app: App) -> bool:
    return all(s.ready + s.scheduled + s.running == 0 for s in app.stats(QUEUE))


def analyse(
    app: App,
    args: argparse.Namespace,
    tags: dict[int, tuple[str, str]],
    run: Run,
    events: Path,
) -> dict[str, Any]:
    starts: dict[int, list[dict[str, Any]]] = defaultdict(list)
    ended: dict[tuple[int, int], float] = {}  # (tag, pid) -> when that run logged its end
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    for ev in sorted(lines, key=lambda e: e["mono"]):
        if ev["e"] == "start":
            starts[ev["tag"]].append(ev)
        else:
            ended[(ev["tag"], ev["pid"])] = ev["mono"]
    killed_at = dict(run.kills)

    states = job_states(app, [job_id for job_id, _ in tags.values()])
    succeeded = sum(1 for s in states.values() if s is JobState.SUCCEEDED)
    dead = sum(1 for s in states.values() if s is JobState.DEAD)
    stats = app.stats(QUEUE)

    def cut(ev: dict[str, Any]) -> bool:  # a start whose run the kill cut short
        return (ev["tag"], ev["pid"]) not in ended and ev["pid"] in killed_at

    twice = [evs for evs in starts.values() if len(evs) > 1]
    cut_runs = [ev for evs in starts.values() for ev in evs if cut(ev)]
    all_starts = sorted((ev for evs in starts.values() for ev in evs), key=lambda e: e["mono"])
    by_tenant: dict[str, list[float]] = defaultdict(list)
    for ev in all_starts:
        by_tenant[ev["tenant"]].append(ev["mono"])

    def gaps(moments: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """For each (tenant, moment): the time to that tenant's next start anywhere."""
        found = []
        for tenant, moment in moments:
            later = [t for t in by_tenant[tenant] if t > moment]
            if later:
                found.append((tenant, later[0] - moment))
        return found

    # the lease of a run cut short expired at most --lease after its start (it ran for ms, so
    # no heartbeat extended it); a tenant with no later start had no ready job left
    from_expiry = gaps([(ev["tenant"], ev["mono"] + args.lease) for ev in cut_runs])
    from_kill = gaps([(ev["tenant"], killed_at[ev["pid"]]) for ev in cut_runs])
    log_text = "".join(p.read_text(errors="replace") for p in run.logs if p.exists())
    warned = sum(
        1 for line in log_text.splitlines() if "WARNING" in line and "lease expired" in line
    )
    return {
        "enqueued": len(tags),
        "topped_up": len(tags) - args.jobs,
        "succeeded": succeeded,
        "dead": dead,
        "lost": len(tags) - succeeded - dead,
        "lost_states": sorted({str(s) for s in states.values()} - {"succeeded", "dead"}),
        "never_started": sum(1 for tag in tags if tag not in starts),
        "kills": len(run.kills),
        "runs_cut_by_kills": len(cut_runs),
        "ran_twice": len(twice),
        "ran_twice_after_cut_start": sum(1 for evs in twice if any(cut(ev) for ev in evs[:-1])),
        "over_cap": max_at_once(starts, ended, killed_at, CAPPED),
        "cap": args.cap,
        "next_start_from_expiry_s": summary(from_expiry),
        "next_start_from_kill_s": summary(from_kill),
        "expired_attempts": sum(s.failed for s in stats),
        "lease_expired_warnings": warned,
        "sigterm_exit_codes": run.term_codes,
        "term_ok": all(code == 0 for code in run.term_codes),
        "timed_out": run.timed_out,
        "seconds": round(run.seconds, 1),
    }


def job_states(app: App, ids: list[str]) -> dict[str, JobState | None]:
    found: dict[str, JobState | None] = dict.fromkeys(ids)
    for i in range(0, len(ids), 500):
        for info in app.backend.get_jobs(GetJobsParams(ids=ids[i : i + 500])):
            found[info.id] = info.state
    return found


def max_at_once(
    starts: dict[int, list[dict[str, Any]]],
    ended: dict[tuple[int, int], float],
    killed_at: dict[int, float],
    tenant: str,
) -> int:
    """Most runs of ``tenant`` between their start and end (or their process's kill) at once.

    A run's end is logged before its ack reaches the store, so the log never shows more at
    once than the store counted as running: a figure above the cap is a real breach.
    """
    edges: list[tuple[float, int]] = []
    for evs in starts.values():
        for ev in evs:
            if ev["tenant"] == tenant:
                key = (ev["tag"], ev["pid"])
                stop = ended.get(key, killed_at.get(ev["pid"], float("inf")))
                edges += [(ev["mono"], 1), (stop, -1)]
    most = now = 0
    for _, step in sorted(edges):  # at a tie an end (-1) comes before a start
        now += step
        most = max(most, now)
    return most


def summary(gaps: list[tuple[str, float]]) -> dict[str, float | int | str | None]:
    """Median and max gap, and whose gap the max was."""
    if not gaps:
        return {"n": 0, "median": None, "max": None, "max_tenant": None}
    tenant, most = max(gaps, key=lambda g: g[1])
    median = statistics.median(g for _, g in gaps)
    return {"n": len(gaps), "median": round(median, 3), "max": round(most, 3), "max_tenant": tenant}


def clean_up(url: str, work: Path) -> None:
    """Delete the run's store namespace and its temp directory."""
    if url.startswith("redis"):
        import redis

        from fairq.backends.redis.url import parse_url

        opts = parse_url(url)
        client = redis.Redis.from_url(opts.client_url)
        keys = list(client.scan_iter(match=f"{opts.prefix}*", count=1000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
        client.close()
    elif url.startswith("postgres"):
        import psycopg

        from fairq.backends.postgres.url import parse_url as parse_pg

        pg = parse_pg(url)
        with psycopg.connect(pg.conninfo, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{pg.schema}" CASCADE')
    for path in sorted(work.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    work.rmdir()


def show(report: dict[str, Any], url: str, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps({"url": url, **report}))
        return
    fe, fk = report["next_start_from_expiry_s"], report["next_start_from_kill_s"]
    print(f"store {url}: {args.processes} processes x {args.concurrency}, lease {args.lease} s")
    for key in ("enqueued", "topped_up", "succeeded", "dead", "lost", "never_started", "kills",
                "runs_cut_by_kills", "ran_twice", "ran_twice_after_cut_start"):  # fmt: skip
        print(f"  {key.replace('_', ' '):28} {report[key]}")
    print(f"  {'over cap (most at once)':28} {report['over_cap']} (cap {report['cap']})")
    for label, gaps in (("next start after expiry", fe), ("next start after kill", fk)):
        print(
            f"  {label:28} median {gaps['median']} s, max {gaps['max']} s "
            f"({gaps['max_tenant']}; n={gaps['n']})"
        )
    print(f"  {'SIGTERM exit codes':28} {report['sigterm_exit_codes']}")
    print(f"  {'expired attempts (store)':28} {report['expired_attempts']}")
    print(f"  {'lease expired WARNING lines':28} {report['lease_expired_warnings']}")
    print(f"  {'seconds':28} {report['seconds']}" + (" (TIMED OUT)" if report["timed_out"] else ""))


if __name__ == "__main__":
    sys.exit(main())
