"""Finding the App a worker runs, from a ``module:attribute`` reference (as uvicorn does)."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from fairq.app import App
from fairq.errors import ConfigError

#: The extra that installs each peer library a tasks module may import (pika: Dramatiq's
#: RabbitMQ broker; amqp: Celery's).
PEER_EXTRAS = {
    "celery": "fairq[celery]",
    "kombu": "fairq[celery]",
    "amqp": "fairq[celery]",
    "rq": "fairq[rq]",
    "dramatiq": "fairq[dramatiq]",
    "pika": "fairq[dramatiq]",
    "redis": "fairq[redis]",
}


def load_app(ref: str) -> App:
    """The fairq App ``package.module:attribute`` names (see ``load_object``)."""
    found = load_object(ref)
    if not isinstance(found, App):
        raise ConfigError(
            f"{ref} is a {type(found).__name__}, not a fairq App; point APP at the object "
            "made by fairq.App(...)"
        )
    return found


def load_object(ref: str, example: str = "myproject.jobs:app") -> object:
    """Import ``package.module:attribute`` (the working directory first on the path).

    Raises ConfigError naming what is missing. An error raised *inside* the module while it is
    imported is not caught: its own traceback is what the user needs to see.
    """
    module_name, sep, attribute = ref.partition(":")
    if not sep or not module_name.strip() or not attribute.strip():
        raise ConfigError(
            f"APP must look like 'package.module:attribute', e.g. {example!r}; got {ref!r}"
        )
    module = _import(module_name)
    found: object = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ConfigError(
                f"module {module_name!r} ({module.__file__}) has no attribute {attribute!r}; "
                f"name the object the module creates, e.g. {example!r}"
            )
        found = getattr(found, part)
    return found


def rebind(app: App, url: str) -> App:
    """Point ``app`` at another store (``--url``).

    The App itself is changed, not copied, so jobs that enqueue follow-up jobs through it
    (``other_job.enqueue(…)``) use the same store the worker serves.
    """
    if url != app.url:
        app.close()
        app.url = url
    return app


def _import(module_name: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        top = missing.partition(".")[0]
        if top in PEER_EXTRAS and top != module_name.partition(".")[0]:
            raise ConfigError(
                f"module {module_name!r} needs {top!r}, which is not installed: pip install "
                f"'{PEER_EXTRAS[top]}'"
            ) from None
        if module_name != missing and not module_name.startswith(missing + "."):
            raise  # the module exists but imports something missing: show the real traceback
        raise ConfigError(
            f"cannot import module {module_name!r}: no module named {missing!r} in the working "
            f"directory ({cwd}) or on sys.path; run from your project's directory or check "
            "the name"
        ) from None
