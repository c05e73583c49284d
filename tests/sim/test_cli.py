"""``fairq simulate`` end to end through click, and a user's trace files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairq.cli import cli
from fairq.cli import simulate as _registers  # noqa: F401  (registers the command)
from fairq.errors import ConfigError
from fairq.sim.workloads import load_trace

SMALL_FLOOD = ["simulate", "-w", "flood", "-p", "jobs=400", "-p", "small=2", "-p", "per_small=3"]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*SMALL_FLOOD, *args])
    return result.exit_code, result.output


def test_simulate_prints_a_table_with_every_strategy() -> None:
    code, output = _run()
    assert code == 0, output
    assert "flood: 406 jobs, 8 workers" in output
    for name in ("fairq", "fifo", "round-robin", "decayed", "slots", "throttled", "lottery"):
        assert f"│ {name}" in output


def test_simulate_json_holds_the_figures_and_fifo_starves_the_newcomers() -> None:
    code, output = _run("--strategies", "fairq,fifo", "--json", "--seed", "3")
    assert code == 0, output
    result = json.loads(output)
    assert (result["workload"], result["jobs"], result["seed"]) == ("flood", 406, 3)
    fairq, fifo = result["strategies"]["fairq"], result["strategies"]["fifo"]
    assert fairq["per_tenant"]["small-0"]["jobs"] == 3
    assert fairq["newcomer_first_start"] < 1.0 < 10.0 < fifo["newcomer_first_start"]


def test_simulate_plot_writes_the_pngs_and_one_self_contained_html(tmp_path: Path) -> None:
    code, output = _run("--strategies", "fairq,fifo", "--plot", str(tmp_path))
    assert code == 0, output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["report.html", "share-fairq.png", "share-fifo.png", "waits.png"]
    assert (tmp_path / "waits.png").read_bytes().startswith(b"\x89PNG")
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert report.count("data:image/png;base64,") == 3
    assert 'src="http' not in report and "src='http" not in report


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategies", "fairq,nope"], "unknown strategy 'nope'"),
        (["-p", "flood=3"], "workload 'flood' has no parameter 'flood'; it takes: jobs,"),
        (["-p", "jobs=many"], "flood parameter jobs='many': expected int"),
        (["-p", "jobs"], "--param 'jobs': write KEY=VALUE"),
    ],
)
def test_simulate_refuses_bad_input_with_the_fix(args: list[str], message: str) -> None:
    code, output = _run(*args)
    assert code == 2
    assert message in output


def test_a_csv_trace_runs_in_arrival_order(tmp_path: Path) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text("arrival,tenant,duration\n5,b,1\n0,a,2\n0.5,a,2\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["simulate", "--trace", str(trace), "--json",
                                      "--strategies", "fifo", "--workers", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    fifo = json.loads(result.output)["strategies"]["fifo"]
    assert fifo["jobs"] == 3 and fifo["makespan"] == 6.0  # a: 0-2, 2-4; b: 5-6


def test_a_json_trace_loads(tmp_path: Path) -> None:
    trace = tmp_path / "jobs.json"
    trace.write_text(json.dumps([{"arrival": 1, "tenant": "x", "duration": 0.5}]), "utf-8")
    (job,) = load_trace(trace).jobs
    assert (job.arrival, job.tenant, job.duration) == (1.0, "x", 0.5)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("t.csv", "arrival,tenant\n1,a\n", "job 1: missing duration"),
        ("t.csv", "arrival,tenant,duration\n1,a,soon\n", "job 1: arrival and duration must be"),
        ("t.csv", "arrival,tenant,duration\n-1,a,1\n", "must be finite and not negative"),
        ("t.csv", "arrival,tenant,duration\n", "holds no jobs"),
        ("t.json", "{", "is not valid JSON"),
        ("t.json", '{"arrival": 1}', "expected a JSON list of"),
        ("t.txt", "1,a,1", "name it .csv or .json"),
    ],
)
def test_a_bad_trace_says_what_is_wrong(tmp_path: Path, name: str, text: str, message: str) -> None:
    trace = tmp_path / name
    trace.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_trace(trace)
    result = CliRunner().invoke(cli, ["simulate", "--trace", str(trace)])
    assert result.exit_code == 2 and message in result.output


def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed: import fails
    code, output = _run("--plot", str(tmp_path))
    assert code == 2
    assert "pip install 'fairq[sim]'" in output
    assert list(tmp_path.iterdir()) == []  # refused before running, nothing written
