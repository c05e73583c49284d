"""Serving ``/metrics``: one registry per App with its process metrics and the store's gauges.

The worker serves it on its own port (``fairq worker APP --metrics-port 9100``); another
process (the dashboard) mounts the same exposition in its web app::

    from fairq.instrument.metrics_http import asgi_app, metrics_registry

    routes = [Mount("/metrics", app=asgi_app(metrics_registry(app)))]
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fairq.errors import ConfigError
from fairq.instrument.extras import needs_extra
from fairq.instrument.prometheus import PrometheusMetrics
from fairq.instrument.tenant_gauges import DEFAULT_TOP, TenantGauges

with needs_extra("metrics", "Prometheus metrics", "prometheus_client"):
    from prometheus_client import CollectorRegistry, make_asgi_app, make_wsgi_app, start_http_server

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from fairq.app import App

__all__ = ["MetricsServer", "asgi_app", "metrics_registry", "serve", "wsgi_app"]

# per App: its registry and the gauge settings it was made with
_registries: weakref.WeakKeyDictionary[App, tuple[CollectorRegistry, tuple[object, ...]]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def metrics_registry(
    app: App,
    *,
    queues: Sequence[str] | None = None,
    top: int = DEFAULT_TOP,
    rank: str = "ready",
) -> CollectorRegistry:
    """The registry to serve for ``app``: the one of its ``PrometheusMetrics`` (if it has none,
    one is added, on a registry of its own), with the store's gauges of ``queues`` (None: all)
    and the ``top`` tenants per queue (``TenantGauges``). Asked again for the same App, the
    same registry (the gauges are registered once). To serve your own metrics beside fairq's,
    give the App ``PrometheusMetrics()`` (prometheus_client's global registry) yourself."""
    settings = (None if queues is None else tuple(queues), top, rank)
    with _lock:
        found = _registries.get(app)
        if found is not None:
            registry, made_with = found
            if made_with != settings:
                raise ConfigError(
                    f"this App already serves metrics with queues, top, rank = {made_with}; "
                    f"asked for {settings}: give every caller the same settings"
                )
            return registry
        plugin = next((m for m in app.middleware if isinstance(m, PrometheusMetrics)), None)
        if plugin is None:
            plugin = PrometheusMetrics(CollectorRegistry())
            app.add_middleware(plugin)
        registry = plugin.registry
        registry.register(
            TenantGauges(lambda: app.backend, queues=queues, top=top, rank=rank, clock=app.clock)
        )
        _registries[app] = (registry, settings)
        return registry


def asgi_app(registry: CollectorRegistry) -> Callable[..., Any]:
    """An ASGI app answering with ``registry``'s exposition (mount it at ``/metrics``)."""
    return make_asgi_app(registry)


def wsgi_app(registry: CollectorRegistry) -> Callable[[dict[str, Any], Any], Iterable[bytes]]:
    """A WSGI app answering with ``registry``'s exposition."""
    return make_wsgi_app(registry)


@dataclass
class MetricsServer:
    """``/metrics`` served by a daemon thread; ``port`` is the one bound (given 0: a free one)."""

    host: str
    port: int
    server: WSGIServer
    thread: threading.Thread

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def serve(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``registry`` on ``host:port`` over HTTP (any path answers; scrape ``/metrics``)."""
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(host=host, port=server.server_port, server=server, thread=thread)
