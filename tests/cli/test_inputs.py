"""Inputs that once ended in a traceback or were stored when they could never run (issues #22
and #31: Unicode digits, which ``isdigit`` takes and ``int`` refuses or reads): each now exits 2
with one line naming the value, and the store is left as it was."""

from __future__ import annotations

import pytest
from cli_store import Store

from fairq.demo.jobs import WORK

HUGE = "1" * 5000  # over Python's 4,300-digit limit for reading an int

REFUSED = [
    (["enqueue", WORK, f'["acme", {HUGE}]'], "ARGS_JSON cannot be read"),
    (["enqueue", WORK, '["acme", 0]', "--kwargs", f'{{"n": {HUGE}}}'], "--kwargs cannot be read"),
    (["enqueue", WORK, '["acme", 0]', "--priority", HUGE], "--priority"),
    (["enqueue", WORK, '["acme", 0]', "--priority", str(2**31)], "--priority"),
    (["tenants", "demo", "acme", "--max-running", HUGE], "5000 digits is over 2,147,483,647"),
    (["tenants", "demo", "acme", "--max-running", "²"], "write it in the digits 0-9"),
    (["tenants", "demo", "acme", "--max-running", "١٢"], "write it in the digits 0-9"),
    (["tenants", "demo", "acme", "--rate", "1/s", "--burst", "①"], "--burst"),
    (["tenants", "demo", "acme", "--rate", "١٠٠/s"], "cannot read rate"),
    (["tenants", "demo", "acme", "--rate", f"{HUGE}/s"], "5000 digits is over"),
    (["queue", "demo", "--max-running", "²"], "write it in the digits 0-9"),
    (["dead", "list", "--limit", "²"], "--limit"),
    (["enqueue", WORK, '["acme", 0]', "--priority", "①"], "--priority"),
    (["tenants", "demo", "acme", "--max-running", str(2**31)], "2,147,483,647"),
    (["tenants", "demo", "acme", "--rate", "1/s", "--burst", HUGE], "--burst"),
    (["tenants", "demo", "acme", "--rate", f"{2**31}/s"], "rate's count"),
    (["queue", "demo", "--max-running", str(2**63)], "2,147,483,647"),
    (["dead", "list", "--limit", HUGE], "--limit"),
    (["enqueue", WORK, '["ac\\u0000me", 0]'], "NUL"),
    (["enqueue", WORK, '["acme", 0]', "--tenant", "a\x00b"], "NUL"),
    (["enqueue", WORK, '["acme", 0, 1]'], "too many positional arguments"),
    (["enqueue", WORK, '["acme"]'], "missing a required argument: 'seconds'"),
    (["enqueue", WORK, '["acme", 0]', "--kwargs", '{"later": 1}'], "unexpected keyword"),
]


@pytest.mark.parametrize(("args", "message"), REFUSED, ids=lambda v: str(v)[:60])
def test_refused_with_one_line_and_nothing_stored(
    store: Store, args: list[str], message: str
) -> None:
    store.enqueue("acme")
    before = store.snapshot()
    result = store.run(*args)  # a raw exception would propagate here and fail the test
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert store.snapshot() == before
