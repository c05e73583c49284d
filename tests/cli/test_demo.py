"""The real demo, end to end and reduced: real worker processes, a real SQLite file.

The only timing claim is the comparison of the two modes within the same run: the small
tenants wait less, and Jain's index is higher, under fair scheduling than under FIFO.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.processes
def test_fair_scheduling_beats_fifo_for_small_tenants() -> None:
    command = [sys.executable, "-m", "fairq", "demo", "--jobs", "300", "--small", "3", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    fifo, fair = result["modes"]["fifo"], result["modes"]["fair"]
    assert set(fifo["tenants"]) == {"greedy", "small-1", "small-2", "small-3"}
    assert fifo["small"]["jobs"] == fair["small"]["jobs"] == 15
    assert fifo["tenants"]["greedy"]["jobs"] == fair["tenants"]["greedy"]["jobs"] == 300
    assert fair["small"]["p99"] < fifo["small"]["p99"]
    assert fair["jain_index"] > 0.9 > fifo["jain_index"]  # over the rest of the flood
    assert result["small_p99_speedup"] > 1
