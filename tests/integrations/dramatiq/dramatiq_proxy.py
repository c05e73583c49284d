"""A TCP proxy in front of the broker's Redis that a test can break and mend: a broker outage
for one process (the relay) without stopping the Redis every test shares."""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    """Forwards 127.0.0.1:port to ``upstream``. While broken, every connection (open or new)
    is closed at once, before a byte is forwarded; ``refused`` counts the new ones."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.broken = False
        self.refused = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def break_(self) -> None:
        with self._lock:
            self.broken = True
            for conn in self._open:
                _shut(conn)
            self._open.clear()

    def mend(self) -> None:
        with self._lock:
            self.broken = False

    def close(self) -> None:
        self._closed = True
        self.break_()
        _shut(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                if self.broken:
                    self.refused += 1
                    _shut(client)
                    continue
                try:
                    server = socket.create_connection(self.upstream)
                except OSError:
                    _shut(client)
                    continue
                self._open.update((client, server))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for conn in (src, dst):
                _shut(conn)
                with self._lock:
                    self._open.discard(conn)


def _shut(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        conn.close()
