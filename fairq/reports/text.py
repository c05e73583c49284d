"""How durations read for people, the same in ``fairq stats`` and the dashboard."""

from __future__ import annotations

from fairq.policy import histogram


def format_age(seconds: float | None) -> str:
    """``4.2s``, ``3m05s``, ``2h07m``; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        minutes, secs = divmod(int(seconds), 60)
        return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m"


def format_wait(seconds: float | None) -> str:
    """A wait quantile (a bucket's upper bound): ms below a second; ">" past the last one."""
    if seconds is None:
        return "-"
    if seconds >= histogram.BOUNDS[-1]:
        return ">" + format_age(histogram.BOUNDS[-1])
    if seconds < 1.0:
        return f"{seconds * 1000:.0f}ms"
    return format_age(seconds)


def format_run(seconds: float) -> str:
    """A learned run time: ``12ms`` below a second (``0.4ms`` below 1 ms), else as an age."""
    if seconds < 0.001:
        return f"{seconds * 1000:.1f}ms"
    if seconds < 1.0:
        return f"{seconds * 1000:.0f}ms"
    return format_age(seconds)
