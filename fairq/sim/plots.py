"""Plots of a comparison (matplotlib, the ``fairq[sim]`` extra) and one self-contained HTML
report with the PNGs embedded: wait distributions per strategy, and each strategy's share of
service per tenant over time."""

from __future__ import annotations

import base64
import html
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairq.errors import ConfigError
from fairq.sim.compare import Outcome
from fairq.sim.workloads import Workload

if TYPE_CHECKING:
    from fairq.sim.replay import Recorded
    from fairq.sim.whatif import Run

INSTALL_HINT = "plots need matplotlib: pip install 'fairq[sim]'"
_TOP = 5  # tenants drawn by name in a share plot; the rest are summed as "others"


def require_matplotlib() -> None:
    """Raise ConfigError naming the extra when matplotlib is not installed."""
    _pyplot()


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return plt


def write_plots(workload: Workload, outcomes: Sequence[Outcome], directory: Path) -> list[Path]:
    """Write waits.png, one share-<strategy>.png each, and report.html; returns their paths."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    written = [_waits(plt, workload, outcomes, directory / "waits.png")]
    for o in outcomes:
        written.append(_shares(plt, o, directory / f"share-{_slug(o.strategy)}.png"))
    report = directory / "report.html"
    report.write_text(_html(workload, outcomes, written), encoding="utf-8")
    return [*written, report]


def write_replay_plots(recorded: Recorded, runs: Sequence[Run], directory: Path) -> list[Path]:
    """A replay's plots (fairq/sim/whatif.py): tenants.png (the busiest tenants' p50 and p99
    wait, run by run), waits.png, one share-<run>.png each, and report.html."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    workload = Workload(
        name=f"queue {recorded.queue}", jobs=recorded.jobs, weights=recorded.weights
    )
    outcomes = [run.outcome() for run in runs]
    written = [
        _tenant_waits(plt, recorded, runs, directory / "tenants.png"),
        _waits(plt, workload, outcomes, directory / "waits.png"),
    ]
    for o in outcomes:
        written.append(_shares(plt, o, directory / f"share-{_slug(o.strategy)}.png"))
    report = directory / "report.html"
    report.write_text(_html(workload, outcomes, written), encoding="utf-8")
    return [*written, report]


def _tenant_waits(plt: Any, recorded: Recorded, runs: Sequence[Run], path: Path) -> Path:
    """Grouped bars: for each of the busiest tenants, each run's p99 wait (the bar) and p50
    (the dot), so a change's effect on every tenant shows at a glance."""
    jobs = runs[1].figures.per_tenant
    tenants = sorted(jobs, key=lambda t: (-jobs[t].jobs, t))[: _TOP + 3]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(runs)
    for n, run in enumerate(runs):
        found = run.figures.per_tenant
        xs = [i + n * width for i in range(len(tenants))]
        p99 = [found[t].p99 if t in found else math.nan for t in tenants]
        p50 = [found[t].p50 if t in found else math.nan for t in tenants]
        ax.bar(xs, p99, width, label=f"{run.name} p99")
        ax.plot(xs, p50, "k.", markersize=6)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(tenants))])
    ax.set_xticklabels([t[:16] for t in tenants], rotation=20, fontsize="small")
    ax.set_ylabel("wait (s): bar p99, dot p50")
    ax.set_title(f"queue {recorded.queue}: waits per tenant, {len(recorded.jobs):,} jobs")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "-" else "_" for ch in name)


def _waits(plt: Any, workload: Workload, outcomes: Sequence[Outcome], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for o in outcomes:
        waits = sorted(r.wait for r in o.records)
        if waits:
            ax.plot(waits, [(i + 1) / len(waits) for i in range(len(waits))], label=o.strategy)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("wait (s, log scale above 1 s)")
    ax.set_ylabel("share of jobs started within")
    ax.set_title(f"{workload.name}: wait distribution per strategy")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _shares(plt: Any, outcome: Outcome, path: Path) -> Path:
    """Stacked share of worker time per tenant, in up to 200 time slices."""
    records = outcome.records
    end = max((r.finish for r in records), default=1.0)
    width = max(end / 200, 1e-9)
    slices = math.ceil(end / width) or 1
    busy: dict[str, list[float]] = defaultdict(lambda: [0.0] * slices)
    for r in records:
        for start, stop in r.runs():  # a job run in parts is busy only in its parts
            for s in range(int(start // width), min(int(stop // width) + 1, slices)):
                overlap = min(stop, (s + 1) * width) - max(start, s * width)
                if overlap > 0:
                    busy[r.job.tenant][s] += overlap
    ranked = sorted(busy, key=lambda t: -sum(busy[t]))
    rows = {t: busy[t] for t in ranked[:_TOP]}
    if len(ranked) > _TOP:
        rows["others"] = [sum(busy[t][s] for t in ranked[_TOP:]) for s in range(slices)]
    totals = [sum(row[s] for row in rows.values()) or 1.0 for s in range(slices)]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.stackplot(
        [s * width for s in range(slices)],
        [[row[s] / totals[s] for s in range(slices)] for row in rows.values()],
        labels=list(rows),
        step="post",
    )
    ax.set_ylim(0, 1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("share of busy workers")
    ax.set_title(f"{outcome.strategy}: share of service over time")
    ax.legend(fontsize="small", loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _html(workload: Workload, outcomes: Sequence[Outcome], images: Sequence[Path]) -> str:
    head = ["strategy", "wait p50", "wait p99", "worst tenant p50", "Jain", "utilisation"]
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(cell)}</td>"
            for cell in (
                o.strategy,
                f"{o.figures.waits.p50:,.1f}",
                f"{o.figures.waits.p99:,.1f}",
                f"{o.figures.worst_tenant_p50:,.1f}",
                "—" if o.figures.jain_mean is None else f"{o.figures.jain_mean:.3f}",
                f"{o.figures.utilisation:.0%}",
            )
        )
        + "</tr>"
        for o in outcomes
    )
    pictures = "".join(
        f'<p><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode("ascii")}"></p>'
        for p in images
    )
    title = html.escape(f"fairq simulate: {workload.name}, {len(workload.jobs):,} jobs")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;max-width:960px;margin:auto}"
        "td,th{padding:2px 8px;text-align:right}</style></head><body>"
        f"<h1>{title}</h1><table><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>{rows}"
        f"</table>{pictures}</body></html>\n"
    )
