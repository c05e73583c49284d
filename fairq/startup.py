"""Stop signals that arrive while a long-running command starts, before it handles them.

Starting Python, importing fairq and the app, opening the store take a second or so; Python's
default handling would end the process on a SIGTERM then (exit code -15, 143 in a shell) and
turn a Ctrl-C into a traceback. So when this process is the ``fairq`` command, importing fairq
catches SIGTERM and SIGINT first thing (fairq/__init__.py calls ``catch_early`` before its
other imports; this module imports only the standard library): such a signal is remembered.
Each is caught only if it has Python's own handling: one the parent left ignored (a shell
without job control starts a background job with SIGINT ignored) stays ignored.
``fairq worker``, ``relay`` and ``dashboard`` take the remembered signals over and stop as
soon as they can, having taken no job (exit code 0); every other command gives them back to
Python (``release``), so a signal remembered meanwhile ends it as it always did.

Only the first few tens of milliseconds of the interpreter's own start, before any of fairq's
code runs, are left to the default handling.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: What Python itself does with each stop signal when nothing else was installed.
_DEFAULTS: dict[signal.Signals, Callable[[int, FrameType | None], Any] | signal.Handlers] = {
    signal.SIGTERM: signal.SIG_DFL,
    signal.SIGINT: signal.default_int_handler,
}


class StartupSignals:
    """Remembers SIGTERM/SIGINT until the command takes over their handling; then calls the
    command's ``stop`` (``then``) for a signal that comes later still."""

    def __init__(self, signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> None:
        self.received: list[str] = []
        #: The signals this one catches.
        self.signals = signals
        self._stop: Callable[[], object] | None = None

    @classmethod
    def install(cls, signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> StartupSignals:
        """Catch ``signals`` from now on (in the main thread: elsewhere, signals are not this
        thread's to handle, and nothing is installed)."""
        caught = cls(signals)
        if threading.current_thread() is threading.main_thread():
            for signum in signals:
                signal.signal(signum, caught._note)
        return caught

    def catching(self) -> bool:
        """Its handler is still the one for each signal it catches."""
        return all(signal.getsignal(s) == self._note for s in self.signals)

    def then(self, stop: Callable[[], object]) -> None:
        """From now on a stop signal that reaches this handler (none other replaced it, or
        one put it back) calls ``stop``; one received already calls it now."""
        self._stop = stop
        if self.received:
            stop()

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
        if self._stop is not None:
            self._stop()


_early: StartupSignals | None = None


def catch_early() -> None:
    """Catch the stop signals now if this process is the ``fairq`` command (not a program that
    imports fairq as a library), in its main thread: each that has Python's own handling, so
    one that is ignored or handled otherwise is left so."""
    global _early
    if _early is not None or not _is_the_command():
        return
    defaults = tuple(s for s in STOP_SIGNALS if signal.getsignal(s) is _DEFAULTS[s])
    if defaults:
        _early = StartupSignals.install(defaults)


def startup_signals() -> StartupSignals:
    """For a long-running command: the signals caught since the process started (installed
    now when fairq was imported otherwise, e.g. by a test runner)."""
    if _early is not None and _early.catching():
        return _early
    return StartupSignals.install()


def release() -> None:
    """For every other command: Python's own handling back, and a signal caught meanwhile
    delivered again under it (SIGTERM ends the process, SIGINT raises KeyboardInterrupt)."""
    global _early
    caught, _early = _early, None
    if caught is None:
        return
    for signum in caught.signals:
        if signal.getsignal(signum) == caught._note:
            signal.signal(signum, _DEFAULTS[signum])
    for name in caught.received:
        os.kill(os.getpid(), signal.Signals[name])


def _is_the_command() -> bool:
    """``fairq …`` (the console script) or ``python [options] -m fairq …``."""
    args = list(sys.orig_argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "-m":
            return args[:1] == ["fairq"]
        if arg.startswith("-m"):
            return arg == "-mfairq"
        if arg in ("-X", "-W", "--check-hash-based-pycs"):
            args = args[1:]
        elif arg == "-c" or not arg.startswith("-"):
            break
    return os.path.basename(sys.argv[0]) == "fairq"
