"""On a Redis Cluster every script call names keys of one slot, and the hot path (enqueue,
dequeue, ack, heartbeat, fail, release) names no key shared by queues: checked on the commands
the masters really ran (MONITOR)."""

from __future__ import annotations

import shlex
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.keys import key_slot
from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    FailParams,
    HeartbeatParams,
    ReleaseParams,
)

from .helpers import QUEUES, master_index, new_job
from .servers import LocalCluster, binary, wait_until


def test_the_test_queues_spread_over_every_master(cluster: LocalCluster) -> None:
    assert sorted(master_index(q) for q in QUEUES) == [0, 0, 1, 1, 2, 2]
    masters = {cluster.master_of(f"x:{{{q}}}:meta") for q in QUEUES}
    assert len(masters) == 3


@contextmanager
def monitored(cluster: LocalCluster, tmp: Path) -> Iterator[list[list[str]]]:
    """The commands every master runs in the block, each as its words (scripts' own commands
    included: MONITOR shows them)."""
    masters = [p for p, role in cluster.roles().items() if role == "master"]
    logs = {port: tmp / f"monitor{port}.log" for port in masters}
    watchers = []
    for port, log in logs.items():
        with log.open("wb") as out:
            watchers.append(
                subprocess.Popen([binary("redis-cli"), "-p", str(port), "monitor"], stdout=out)
            )
        wait_until(lambda log=log: log.read_bytes().startswith(b"OK"), "MONITOR to start")
    found: list[list[str]] = []
    try:
        yield found
        marker = uuid.uuid4().hex
        for port, log in logs.items():
            with redis.Redis(port=port) as client:
                client.echo(marker)
            wait_until(lambda log=log: marker.encode() in log.read_bytes(), "MONITOR to catch up")
    finally:
        for watcher in watchers:
            watcher.kill()
            watcher.wait()
    for log in logs.values():
        for line in log.read_text(errors="replace").splitlines()[1:]:
            if "] " in line:
                found.append(shlex.split(line.split("] ", 1)[1]))


def test_the_hot_path_names_no_key_shared_by_queues(
    backend: RedisBackend, cluster: LocalCluster, prefix: str, tmp_path: Path
) -> None:
    jobs = [new_job(n, f"t{n % 3}", queue=QUEUES[n % 3]) for n in range(12)]
    backend.enqueue(EnqueueParams(jobs=jobs[:3], now=0.0))  # registers the queues: once
    with monitored(cluster, tmp_path) as commands:
        backend.enqueue(EnqueueParams(jobs=jobs[3:], now=0.0))
        leases = backend.dequeue(
            DequeueParams(queues=QUEUES[:3], worker_id="w", now=1.0, limit=9)
        ).leases
        assert {lease.queue for lease in leases} == set(QUEUES[:3])
        backend.heartbeat(HeartbeatParams(tokens=[lease.token for lease in leases], now=2.0))
        both = AckAndDequeueParams(
            acks=AckManyParams(tokens=[lease.token for lease in leases[:3]], now=3.0),
            dequeue=DequeueParams(queues=QUEUES[:3], worker_id="w", now=3.0, limit=2),
        )
        taken = backend.ack_and_dequeue(both).dequeue.leases
        backend.ack_many(AckManyParams(tokens=[leases[3].token], now=4.0))
        backend.fail(FailParams(token=leases[4].token, now=4.0, error="e", retry_at=5.0))
        backend.release(ReleaseParams(token=taken[0].token, now=4.0))
    shared = {f"{prefix}:{part}" for part in ("queues", "types", "dir", "seq")}
    fcalls = [words for words in commands if words[0].upper() == "FCALL"]
    assert len(fcalls) >= 6
    for words in commands:
        assert not shared & set(words), words
    for words in fcalls:
        keys = words[3 : 3 + int(words[2])]
        assert len({key_slot(key) for key in keys}) == 1, words[:4]
    claims = [words for words in commands if words[0].upper() == "HSETNX"]
    assert sorted(words[2] for words in claims) == sorted(job.id for job in jobs[3:])
