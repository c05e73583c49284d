"""fairq on a Redis Cluster against the same on one Redis, measured in one run.

Starts its own servers: one ``redis-server`` and a local Redis Cluster of three masters with
one replica each (tests/redis_cluster/servers.py), none persisting anything. Each run, on each
store in turn: N no-op jobs over ``--queues`` queues (10 tenants each) are enqueued in batches
of 1,000, then ``--workers`` worker processes serving every queue (equal weights) drain them.
Printed per store: enqueue and drain jobs/s, and what a job cost the servers:

* server CPU µs per job: the redis-server processes' CPU (``/proc``) during the drain, the
  masters' summed (the replicas' apart); the one Redis has a replica too, so both pay for
  replication alike;
* Redis commands per job (``INFO commandstats`` calls, those run inside fairq's functions
  included, summed over the masters): the work per job, a count that the machine's load does
  not move; FCALLs per job (calls into fairq's functions);
* each master's share of the commands (how the queues spread over the masters).

Then, on the cluster, one job per ``enqueue`` call with and without ``wait_replicas=1`` (each
enqueue waits until a replica has its job: docs/redis.md).

The machine's load is printed: on 2 shared cores a 3-master cluster cannot run faster than
one Redis in absolute terms (its six servers and the workers share the same cores); what it
can show is the cost per job and the spread over masters.

    .venv/bin/python benchmarks/redis_cluster.py --n 20000 --runs 3
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from redis_cluster_jobs import make_app  # noqa: E402

BATCH = 1000
DEADLINE = 600.0


def _servers() -> ModuleType:
    """tests/redis_cluster/servers.py, by path (this script's own name would hide its package)."""
    spec = importlib.util.spec_from_file_location(
        "fairq_cluster_servers", ROOT / "tests" / "redis_cluster" / "servers.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@dataclass
class Target:
    """A store to measure: its URL, and the pids and ports of its masters and replicas."""

    name: str
    url: str
    masters: dict[int, int]  # port -> pid
    replicas: dict[int, int]


def cpu(pids: list[int]) -> float:
    """User + system CPU seconds of the processes and their children."""
    total = 0
    for pid in pids:
        for one in [pid, *_children(pid)]:
            try:
                fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


#: Commands of the measurement itself, left out of the counts.
OWN = ("cmdstat_info", "cmdstat_config|resetstat", "cmdstat_ping", "cmdstat_flushall")


def commands(ports: list[int]) -> dict[int, tuple[int, int]]:
    """Per port: commands run (those inside functions included), FCALLs (INFO commandstats)."""
    found = {}
    for port in ports:
        with redis.Redis(port=port) as client:
            stats = client.info("commandstats")
        calls = sum(int(v["calls"]) for k, v in stats.items() if k not in OWN)
        found[port] = (calls, int(stats.get("cmdstat_fcall", {}).get("calls", 0)))
    return found


def reset(ports: list[int]) -> None:
    for port in ports:
        with redis.Redis(port=port) as client:
            client.config_resetstat()


def wait(condition: Callable[[], bool], what: str) -> float:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.perf_counter()


@contextmanager
def workers(url: str, count: int, queues: int, concurrency: int, own: bool) -> Iterator[list[int]]:
    """``count`` worker processes serving every queue at equal weights, or (``own``) one
    queue each (``count`` = ``queues``)."""
    every = ",".join(f"q{i}:1" for i in range(queues))
    orders = [f"q{i}" for i in range(queues)] if own else [every] * count
    path = [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "BENCH_FAIRQ_URL": url, "PYTHONPATH": os.pathsep.join(path)}
    procs = [
        subprocess.Popen([sys.executable, "-m", "fairq", "worker", "redis_cluster_jobs:app",
                          "--queues", order, "--concurrency", str(concurrency)],
                         cwd=HERE, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        for order in orders
    ]  # fmt: skip
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def drain(target: Target, n: int, queues: int, args: argparse.Namespace) -> dict[str, float]:
    masters = list(target.masters)
    for port in masters:
        with redis.Redis(port=port) as client:
            client.flushall()
    app = make_app(target.url)
    try:
        app.publish()
        empty = app.jobs["empty"]
        calls = [empty.options(queue=f"q{i % queues}").call(f"t{i % 10}") for i in range(n)]
        reset(masters)
        started = time.perf_counter()
        for at in range(0, n, BATCH):
            app.enqueue_many(calls[at : at + BATCH])
        enqueued = time.perf_counter()
        enq = commands(masters)
        reset([*masters, *target.replicas])
        done = lambda: sum(row.succeeded for row in app.stats())  # noqa: E731
        with workers(target.url, args.workers, queues, args.concurrency, args.own) as pids:
            cpu0 = cpu(list(target.masters.values())), cpu(list(target.replicas.values()))
            w0 = cpu(pids)
            first = wait(lambda: done() > 0, "the first job")
            count0 = done()
            last = wait(lambda: done() >= n, "every job")
            cpu1 = cpu(list(target.masters.values())), cpu(list(target.replicas.values()))
            w1 = cpu(pids)
        used = commands(masters)
    finally:
        app.close()
    total = sum(u for u, _ in used.values())
    per_job = 1e6 / n
    return {
        "enqueue_per_s": n / (enqueued - started),
        "enqueue_commands": sum(u for u, _ in enq.values()) / n,
        "drain_per_s": (n - count0) / (last - first),
        "commands": total / n,
        "cpu_us": (cpu1[0] - cpu0[0]) * per_job,
        "replica_cpu_us": (cpu1[1] - cpu0[1]) * per_job,
        "workers_cpu_us": (w1 - w0) * per_job,
        "fcalls": sum(f for _, f in used.values()) / n,
        "shares": [round(100 * used[p][0] / total) for p in masters],  # type: ignore[dict-item]
    }


def single_calls(url: str, count: int) -> float:
    """Jobs/s enqueued one per call."""
    app = make_app(url)
    try:
        app.publish()
        empty = app.jobs["empty"]
        started = time.perf_counter()
        for i in range(count):
            empty.options(queue=f"q{i % 6}").enqueue(f"t{i % 10}")
        return count / (time.perf_counter() - started)
    finally:
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="jobs per drain")
    parser.add_argument("--queues", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=16, help="jobs in flight per process")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--single-calls", type=int, default=2000, help="jobs for the WAIT figure")
    parser.add_argument(
        "--own-queue",
        dest="own",
        action="store_true",
        help="a worker process per queue, serving that queue only (--workers is ignored)",
    )
    parser.add_argument(
        "--only-single",
        action="store_true",
        help="one Redis only (e.g. to compare two checkouts: PYTHONPATH=<other checkout>)",
    )
    args = parser.parse_args()
    servers = _servers()
    print(f"cores: {os.cpu_count()}, load before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fairq-bench-") as tmp:
        port = servers.free_block(2, 7300)
        single, replica = (
            _server(servers, p, tmp, *extra)
            for p, extra in ((port, []), (port + 1, ["--replicaof", servers.HOST, str(port)]))
        )
        cluster = None if args.only_single else servers.LocalCluster(Path(tmp) / "cluster")
        try:
            servers.wait_until(lambda: _answers(port) and _linked(port + 1), "the single Redis")
            targets = [Target("one Redis", f"redis://{servers.HOST}:{port}/0?prefix=fq",
                              {port: single.pid}, {port + 1: replica.pid})]  # fmt: skip
            if cluster is not None:
                roles = cluster.start().roles()
                pids = {p: cluster.processes[p].pid for p in roles}
                targets.append(Target(
                    "Cluster (3 masters)", f"{cluster.url}&prefix=fq",
                    {p: pids[p] for p, r in roles.items() if r == "master"},
                    {p: pids[p] for p, r in roles.items() if r != "master"},
                ))  # fmt: skip
            _measure(targets, args)
        finally:
            if cluster is not None:
                cluster.stop()
            for server in (single, replica):
                server.kill()
                server.wait()
    print(f"load after: {os.getloadavg()}")


def _measure(targets: list[Target], args: argparse.Namespace) -> None:
    results: dict[str, list[dict[str, float]]] = {t.name: [] for t in targets}
    for run in range(1, args.runs + 1):
        for target in targets:
            found = drain(target, args.n, args.queues, args)
            results[target.name].append(found)
            print(f"run {run}, {target.name}: {_line(found)}", flush=True)
    for target in targets:
        _medians(target.name, results[target.name])
    if len(targets) == 1:
        return
    _summary(results, targets)
    plain = single_calls(targets[1].url, args.single_calls)
    waited = single_calls(f"{targets[1].url}&wait_replicas=1", args.single_calls)
    print(
        f"cluster, one job per enqueue call: {plain:,.0f} jobs/s; with wait_replicas=1: "
        f"{waited:,.0f} jobs/s ({waited / plain:.2f}x)"
    )


def _server(servers: ModuleType, port: int, folder: str, *extra: str) -> subprocess.Popen[bytes]:
    command = [servers.binary("redis-server"), "--port", str(port), "--bind", servers.HOST,
               "--save", "", "--appendonly", "no", "--dir", folder, *extra]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)


def _answers(port: int) -> bool:
    try:
        with redis.Redis(port=port) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def _linked(port: int) -> bool:
    try:
        with redis.Redis(port=port) as client:
            return client.info("replication").get("master_link_status") == "up"
    except redis.RedisError:
        return False


def _line(found: dict[str, float]) -> str:
    return (
        f"enqueue {found['enqueue_per_s']:,.0f} jobs/s ({found['enqueue_commands']:.1f} commands "
        f"per job), drain {found['drain_per_s']:,.0f} jobs/s, {found['commands']:.1f} commands "
        f"per job, server CPU {found['cpu_us']:.0f} µs per job (replicas "
        f"{found['replica_cpu_us']:.0f}), workers' CPU {found['workers_cpu_us']:.0f} µs per job, "
        f"{found['fcalls']:.3f} FCALLs per job, commands per master % {found['shares']}"
    )


def _medians(name: str, found: list[dict[str, float]]) -> None:
    keys = ("drain_per_s", "commands", "cpu_us", "workers_cpu_us", "fcalls", "enqueue_commands")
    median = {k: statistics.median(r[k] for r in found) for k in keys}
    print(f"medians, {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in median.items()))


def _summary(results: dict[str, list[dict[str, float]]], targets: list[Target]) -> None:
    one, many = (results[t.name] for t in targets)

    def ratio(key: str) -> float:
        return statistics.median(r[key] for r in many) / statistics.median(r[key] for r in one)

    print(
        f"medians, cluster / one Redis: drain jobs/s {ratio('drain_per_s'):.2f}x, enqueue "
        f"jobs/s {ratio('enqueue_per_s'):.2f}x, commands per job (drain) "
        f"{ratio('commands'):.2f}x, (enqueue) {ratio('enqueue_commands'):.2f}x, server CPU per job "
        f"{ratio('cpu_us'):.2f}x, workers' CPU per job {ratio('workers_cpu_us'):.2f}x",
        flush=True,
    )


if __name__ == "__main__":
    main()
