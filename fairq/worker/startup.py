"""Stop signals that arrive while a worker process starts, before the Worker handles them.

Loading the app (its imports), opening the store and publishing take a moment; Python's
default handling would end the process on a SIGTERM then (exit code -15) and turn a Ctrl-C into
a traceback. ``fairq worker`` installs this first: such a signal is remembered, and the worker
stops as soon as it exists, having taken no job (exit code 0).
"""

from __future__ import annotations

import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StartupSignals:
    """Remembers SIGTERM/SIGINT until ``Worker.run`` takes over their handling."""

    def __init__(self) -> None:
        self.received: list[str] = []

    @classmethod
    def install(cls) -> StartupSignals:
        """Catch the stop signals from now on (main thread only)."""
        caught = cls()
        for signum in STOP_SIGNALS:
            signal.signal(signum, caught._note)
        return caught

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
