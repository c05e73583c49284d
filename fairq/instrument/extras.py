"""The optional libraries the plug-ins use: a missing one becomes the pip command to run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fairq.errors import ConfigError


@contextmanager
def needs_extra(extra: str, what: str, *modules: str) -> Iterator[None]:
    """Around the imports of ``modules`` (top-level names): a ModuleNotFoundError for one of
    them becomes a ConfigError saying which extra to install; others pass through."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in modules:
            raise
        raise ConfigError(
            f"{what} needs fairq's {extra!r} extra, which is not installed (no module named "
            f"{exc.name!r}): pip install 'fairq[{extra}]'"
        ) from None
