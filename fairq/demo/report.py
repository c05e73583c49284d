"""The demo's result as a side-by-side table (for people) and a JSON document (for scripts).

Both are built from the same ``DemoResult``; the JSON holds every figure the table shows, in
seconds, plus the window behind Jain's index and each tenant's worker-seconds in it.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fairq.demo.figures import ModeFigures
from fairq.demo.runner import DemoResult
from fairq.demo.scenario import Mode
from fairq.policy.metrics import Waits

JAIN_NOTE = (
    "Jain's index: (Σx)² / (n·Σx²) over the rest of the flood (from the small tenants' arrival "
    "to the greedy tenant's last start), x = the worker-seconds a tenant got there ÷ its max-min "
    "fair share of them (a small tenant is owed all its jobs' run time); 1 = every tenant got its "
    "share, 1/n = one tenant got everything."
)


def speedup(result: DemoResult) -> float | None:
    """How many times shorter the small tenants' p99 wait is under fairq than under FIFO."""
    fifo, fair = result.modes[Mode.FIFO].small.p99, result.modes[Mode.FAIR].small.p99
    if math.isnan(fifo) or math.isnan(fair):
        return None
    return fifo / max(fair, 1e-6)


def format_seconds(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s"


def render(result: DemoResult) -> RenderableType:
    return Group(_wait_table(result), _summary_table(result), _headline(result), Text(JAIN_NOTE))


def _wait_table(result: DemoResult) -> Table:
    fifo, fair = result.modes[Mode.FIFO], result.modes[Mode.FAIR]
    table = Table(title="Wait from enqueue to start, per tenant", title_justify="left")
    table.add_column("tenant", no_wrap=True)
    table.add_column("jobs", justify="right")
    for mode in (Mode.FIFO, Mode.FAIR):
        style = "red" if mode is Mode.FIFO else "green"
        short = "FIFO" if mode is Mode.FIFO else "fairq"
        for figure in ("p50", "p99", "max"):
            table.add_column(f"{short} {figure}", justify="right", header_style=style)
    for tenant, waits in fifo.tenants.items():
        table.add_row(tenant, str(waits.jobs), *_cells(waits), *_cells(fair.tenants[tenant]))
    table.add_section()
    table.add_row(
        Text("all small", style="bold"),
        str(fifo.small.jobs),
        *_cells(fifo.small, "bold red"),
        *_cells(fair.small, "bold green"),
    )
    return table


def _cells(waits: Waits, style: str = "") -> list[Text]:
    return [Text(format_seconds(v), style=style) for v in (waits.p50, waits.p99, waits.max)]


def _summary_table(result: DemoResult) -> Table:
    fifo, fair = result.modes[Mode.FIFO], result.modes[Mode.FAIR]
    table = Table(title="Whole run", title_justify="left")
    table.add_column("")
    table.add_column(Mode.FIFO.label, justify="right", header_style="red")
    table.add_column(Mode.FAIR.label, justify="right", header_style="green")
    table.add_row("small tenants' p99 wait", *(format_seconds(m.small.p99) for m in (fifo, fair)))
    table.add_row("throughput (jobs/s)", *(f"{m.jobs_per_second:.0f}" for m in (fifo, fair)))
    table.add_row("Jain's fairness index", *(_jain(m) for m in (fifo, fair)))
    table.add_row("run time", *(f"{m.elapsed:.1f} s" for m in (fifo, fair)))
    return table


def _jain(figures: ModeFigures) -> str:
    index = figures.fairness.index
    return "-" if index is None else f"{index:.2f}"


def _headline(result: DemoResult) -> Text:
    fifo, fair = result.modes[Mode.FIFO].small.p99, result.modes[Mode.FAIR].small.p99
    factor = speedup(result)
    if factor is None:
        return Text("No small-tenant jobs ran; nothing to compare.")
    return Text.assemble(
        "Small tenants' p99 wait: ",
        (format_seconds(fifo), "bold red"),
        " with FIFO → ",
        (format_seconds(fair), "bold green"),
        " with fairq\n",
        (f"→ {factor:.0f}× faster for small tenants", "bold reverse green"),
    )


def to_json(result: DemoResult, store: str) -> dict[str, Any]:
    """Every figure in seconds; NaN (no data) becomes null."""
    document: dict[str, Any] = _clean(
        {
            "store": store,
            "scenario": asdict(result.scenario),
            "modes": {mode.value: _mode_json(f) for mode, f in result.modes.items()},
            "small_p99_speedup": speedup(result),
            "jain_definition": JAIN_NOTE,
        }
    )
    return document


def _mode_json(figures: ModeFigures) -> dict[str, Any]:
    return {
        "tenants": {t: asdict(w) for t, w in figures.tenants.items()},
        "small": asdict(figures.small),
        "jobs_per_second": figures.jobs_per_second,
        "elapsed": figures.elapsed,
        "jain_index": figures.fairness.index,
        "jain_window": figures.fairness.window,
        "worker_seconds_in_window": figures.fairness.got,
        "fair_share_in_window": figures.fairness.owed,
    }


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
