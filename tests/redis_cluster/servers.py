"""A real local Redis Cluster for the tests and benchmarks: masters with one replica each.

``LocalCluster(root).start()`` starts ``redis-server --cluster-enabled yes`` processes on free
ports (no persistence), joins them with ``redis-cli --cluster create … --cluster-replicas 1``,
and returns once every node reports the cluster ok and every replica is in sync: it polls
``CLUSTER INFO`` and ``INFO replication``, it never sleeps a fixed time. ``stop()`` ends every
process it started. A missing ``redis-server`` or ``redis-cli`` raises (a test fails, never
skips). From a shell (the benchmarks use this too)::

    python tests/redis_cluster/servers.py /tmp/cluster    # prints the URL; Ctrl-C stops it
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

HOST = "127.0.0.1"
#: Where the search for a free block of ports starts (each node also uses port + 10000, its
#: cluster bus); ``$FAIRQ_TEST_CLUSTER_PORT`` moves it.
FIRST_PORT = int(os.environ.get("FAIRQ_TEST_CLUSTER_PORT", "7100"))
#: How long a master may not answer before its replica takes over (cluster-node-timeout):
#: Redis's default. It must exceed the longest script call (a conformance scenario enqueues
#: 100,000 jobs in one call, which blocks its master for seconds on a loaded machine); the
#: failover test starts a cluster of its own with a short one.
NODE_TIMEOUT_MS = 15000
#: Only so a broken start fails instead of hanging.
DEADLINE = 60.0


def binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(
            f"{name} is not on PATH: the Redis Cluster tests start their own cluster "
            "(apt-get install redis-server, which brings redis-cli too)"
        )
    return found


def wait_until(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    """Poll ``condition`` until it holds; the timeout only turns a hang into an error."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as redis-server binds
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_block(count: int, start: int = FIRST_PORT) -> int:
    """The first port p >= start (in steps of 10) with p .. p+count-1 and their bus ports free."""
    for base in range(start, 20000 - count, 10):
        ports = range(base, base + count)
        if all(_free(p) and _free(p + 10000) for p in ports):
            return base
    raise RuntimeError(f"no {count} free ports from {start} on")


@dataclass
class LocalCluster:
    """``masters`` masters with ``replicas`` replicas each, in ``root`` (a temp dir if None)."""

    root: Path | None = None
    masters: int = 3
    replicas: int = 1
    node_timeout_ms: int = NODE_TIMEOUT_MS
    ports: list[int] = field(default_factory=list)
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        """The store URL of the cluster (fairq's ``?cluster=1``), every node a seed."""
        seeds = ",".join(f"{HOST}:{p}" for p in self.ports[1:])
        return f"redis://{HOST}:{self.ports[0]}/0?cluster=1&cluster_nodes={seeds}"

    def start(self) -> LocalCluster:
        server, cli = binary("redis-server"), binary("redis-cli")
        if self.root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fairq-cluster-")
            self.root = Path(self._tmp.name)
        count = self.masters * (1 + self.replicas)
        base = free_block(count)
        self.ports = list(range(base, base + count))
        try:
            for port in self.ports:
                self._spawn(server, port)
            for port in self.ports:
                wait_until(lambda p=port: self._answers(p), f"redis-server on port {port}")
            created = subprocess.run(
                [cli, "--cluster", "create", *(f"{HOST}:{p}" for p in self.ports),
                 "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                capture_output=True, text=True, timeout=DEADLINE,
            )  # fmt: skip
            if created.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}")
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, server: str, port: int) -> None:
        assert self.root is not None
        folder = self.root / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        log = open(folder / "redis.log", "ab")  # noqa: SIM115 (handed to the process)
        self.processes[port] = subprocess.Popen(
            [server, "--port", str(port), "--bind", HOST, "--dir", str(folder),
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(self.node_timeout_ms),
             # a replica takes over however long it was cut off from its master
             "--cluster-replica-validity-factor", "0",
             "--cluster-allow-replica-migration", "no",
             "--save", "", "--appendonly", "no",
             "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(host=HOST, port=port, socket_timeout=5.0, decode_responses=True)

    def _answers(self, port: int) -> bool:
        process = self.processes.get(port)
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"redis-server on port {port} exited with {process.returncode}")
        try:
            with self.client(port) as one:
                return bool(one.ping())
        except redis.RedisError:
            return False

    def _info(self, port: int, *sections: str) -> dict[str, str]:
        with self.client(port) as one:
            if sections == ("cluster",):
                return {k: str(v) for k, v in one.cluster("info").items()}
            return {k: str(v) for k, v in one.info(*sections).items()}

    def running(self) -> list[int]:
        return [p for p, proc in self.processes.items() if proc.poll() is None]

    def healthy(self) -> bool:
        """Every running node sees the cluster ok with all slots served, the expected number of
        masters, and every replica linked to its master and in sync."""
        try:
            masters = 0
            for port in self.running():
                state = self._info(port, "cluster")
                if (state.get("cluster_state"), state.get("cluster_slots_ok")) != ("ok", "16384"):
                    return False
                replication = self._info(port, "replication")
                if replication["role"] == "master":
                    masters += 1
                elif (
                    replication.get("master_link_status") != "up"
                    or replication.get("master_sync_in_progress") != "0"
                ):
                    return False
            return masters == self.masters
        except (redis.RedisError, KeyError):
            return False

    def wait_healthy(self, timeout: float = DEADLINE) -> None:
        wait_until(self.healthy, "the Redis Cluster to report ok", timeout)

    def roles(self) -> dict[int, str]:
        """Each running node's role now: 'master' or 'slave'."""
        return {p: self._info(p, "replication")["role"] for p in self.running()}

    def master_of(self, key: str) -> int:
        """The port of the master serving ``key``'s slot now."""
        for port, role in self.roles().items():
            if role == "master":
                with self.client(port) as one:
                    slot = int(one.execute_command("CLUSTER KEYSLOT", key))
                    for start, end, primary, *_ in one.execute_command("CLUSTER SLOTS"):
                        if start <= slot <= end:
                            return int(primary[1])
        raise RuntimeError(f"no master serves {key!r}")

    def replicas_of(self, master: int) -> list[int]:
        """The running nodes replicating ``master`` now."""
        found = []
        for port in self.running():
            replication = self._info(port, "replication")
            if replication["role"] == "slave" and replication["master_port"] == str(master):
                found.append(port)
        return found

    def kill(self, port: int) -> None:
        """SIGKILL one node (a crash: nothing is saved, no goodbye to the others)."""
        process = self.processes[port]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=DEADLINE)

    def restart(self, port: int) -> None:
        """Start a killed node again with its nodes.conf: it rejoins the cluster (a master
        that lost its slots comes back as a replica of the node that took them)."""
        self._spawn(binary("redis-server"), port)
        wait_until(lambda: self._answers(port), f"redis-server on port {port}")

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
        for process in self.processes.values():
            process.wait(timeout=DEADLINE)
        self.processes.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


_shared: LocalCluster | None = None
_shared_lock = threading.Lock()


def shared() -> LocalCluster:
    """One cluster per test process, started on first use and stopped when the process ends
    (the conformance suite and tests/redis_cluster share it; the failover test starts its own)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            kept = os.environ.get("FAIRQ_TEST_CLUSTER_DIR")  # the nodes' logs stay there
            _shared = LocalCluster(Path(kept) if kept else None).start()
            atexit.register(_shared.stop)
        return _shared


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    stops = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # sigwait takes them, not their default
    cluster = LocalCluster(root).start()
    print(cluster.url, flush=True)
    try:
        signal.sigwait(stops)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
