"""A TCP proxy in front of the broker that a test can take down and bring back, so a broker
outage is tested without stopping the shared Redis (the Celery, RQ and Dramatiq tests)."""

from __future__ import annotations

import contextlib
import socket
import threading


def free_port() -> int:
    """A port nothing listens on (for a client that must find no server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Proxy:
    """Forwards 127.0.0.1:``port`` to ``target``. While down, it accepts connections and closes
    them at once (counted in ``refused``: each is one attempt of a client to get through)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.refused = 0
        self._up = True
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def down(self) -> None:
        with self._lock:
            self._up = False
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def up(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self.down()
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if not self._up:
                    self.refused += 1
                    client.close()
                    continue
                upstream = socket.create_connection(self.target)
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
