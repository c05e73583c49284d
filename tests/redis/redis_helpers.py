"""Small helpers for the Redis tests (this folder is not a package: a package named
``redis`` would hide redis-py, so modules here have names no other folder uses)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable

import pytest
import redis

from fairq.job import NewJob


def new_job(n: int, tenant: str = "a", *, queue: str = "default", payload: str = "") -> NewJob:
    return NewJob(
        id=f"j{n}",
        name="task",
        queue=queue,
        tenant=tenant,
        payload=payload or f'{{"args":[{n}],"kwargs":{{}}}}',
        run_at=0.0,
        max_attempts=3,
        lease_timeout=30.0,
        cost=1.0,
    )


def keys_of(raw: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(raw.scan_iter(match=f"{prefix}:*"))


def wait_for(condition: Callable[[], object], what: str, timeout: float = 90.0) -> None:
    """Poll ``condition`` until it holds; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


NO_PERSISTENCE = ("--save", "", "--appendonly", "no")


def start_server(port: int, *options: str) -> subprocess.Popen[bytes]:
    """A private ``redis-server`` (no persistence unless ``options`` say otherwise), answering."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not on PATH: this test starts a private one")
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", *(options or NO_PERSISTENCE)],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    wait_for(lambda: answers(client), "the private redis-server to answer")
    return server


def answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


class CuttingProxy:
    """A TCP proxy to a Redis that, once armed, drops the client's connection at the next
    request containing ``marker``: after forwarding it and the server's reply coming back
    (a reply lost with its connection: the server ran the command, the client never hears
    so), or, with ``drop``, without forwarding it (the server never sees it). redis-py then
    sends the command again on a new connection.

    ``replied`` is set when the server has answered the cut request; the connection is
    dropped once ``resume`` is set (it is, unless a test clears it to act in between)."""

    def __init__(self, upstream_port: int, marker: bytes) -> None:
        self.upstream_port = upstream_port
        self.marker = marker
        self.drop = False
        self.armed = threading.Event()
        self.replied = threading.Event()
        self.resume = threading.Event()
        self.resume.set()
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            cut = threading.Event()
            threading.Thread(target=self._pump, args=(upstream, client, cut), daemon=True).start()
            threading.Thread(
                target=self._forward, args=(client, upstream, cut), daemon=True
            ).start()

    def _forward(
        self, client: socket.socket, upstream: socket.socket, cut: threading.Event
    ) -> None:
        """Client to server, watching for the marker."""
        while data := _recv(client):
            if self.marker in data and self.armed.is_set():
                self.armed.clear()
                cut.set()  # from now on, nothing goes back to this client
                self.cuts += 1
                if not self.drop:
                    upstream.sendall(data)
                    self.replied.wait(30.0)  # the server ran it; its reply goes nowhere
                    self.resume.wait(30.0)
                break
            upstream.sendall(data)
        for sock in (client, upstream):
            sock.close()

    def _pump(self, upstream: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        """Server to client, until either side closes or the connection is cut."""
        while (data := _recv(upstream)) and not cut.is_set():
            try:
                client.sendall(data)
            except OSError:
                return
        if data:
            self.replied.set()

    def close(self) -> None:
        self._listener.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""
