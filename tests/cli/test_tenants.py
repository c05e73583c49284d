"""``fairq tenants`` / ``fairq queue``: weights and caps at run time; bad values change nothing."""

from __future__ import annotations

import pytest
from cli_store import Store

from fairq.contract import GetQueueParams


def _settings(store: Store, tenant: str = "acme") -> tuple[float, int | None]:
    (row,) = store.app.stats(queue="demo", tenant=tenant)
    return row.weight, row.max_running


def test_set_weight_and_cap_then_reset(store: Store) -> None:
    store.enqueue("acme")
    result = store.run("tenants", "demo", "acme", "--weight", "3")
    assert result.exit_code == 0, result.output
    assert "acme" in result.stdout
    assert _settings(store) == (3.0, None)
    assert store.run("tenants", "demo", "acme", "--max-running", "2").exit_code == 0
    assert _settings(store) == (3.0, 2)
    assert store.run("tenants", "demo", "acme", "--max-running", "none").exit_code == 0
    assert _settings(store) == (3.0, None)
    assert store.run("tenants", "demo", "acme", "--max-running", "2").exit_code == 0
    assert store.run("tenants", "demo", "acme", "--reset").exit_code == 0
    assert _settings(store) == (1.0, None)


def test_show_queue_and_one_tenant(store: Store) -> None:
    store.enqueue("acme")
    store.enqueue("globex")
    store.app.set_tenant("demo", "globex", weight=5)
    everyone = store.run("tenants", "demo")
    assert everyone.exit_code == 0
    assert "acme" in everyone.stdout and "globex" in everyone.stdout
    one = store.run("tenants", "demo", "globex")
    assert "globex" in one.stdout and "acme" not in one.stdout
    assert " 5 " in one.stdout


def test_queue_defaults(store: Store) -> None:
    store.enqueue("acme")
    result = store.run("queue", "demo", "--max-running", "4")
    assert result.exit_code == 0, result.output
    assert "default cap 4" in result.stdout
    assert _settings(store) == (1.0, 4)
    assert store.run("queue", "demo", "--weight", "2").exit_code == 0
    assert _settings(store) == (2.0, 4)  # the cap is kept
    assert "default cap none" in store.run("queue", "demo", "--max-running", "none").stdout
    assert "default weight 2" in store.run("queue", "demo").stdout


BAD_VALUES = ["0", "-1", "nan", "inf", "abc", ""]
BAD_TENANT_WEIGHTS = ["-1", "nan", "inf", "abc", ""]  # 0 pauses a tenant
BAD_CAPS = ["0", "-1", "1.5", "abc", "", "nan"]


@pytest.mark.parametrize(
    "args",
    [["tenants", "demo", "acme", "--weight", w] for w in BAD_TENANT_WEIGHTS]
    + [["tenants", "demo", "acme", "--max-running", c] for c in BAD_CAPS]
    + [["queue", "demo", "--weight", w] for w in BAD_VALUES]
    + [["queue", "demo", "--max-running", c] for c in BAD_CAPS]
    + [
        ["tenants", "demo", "--weight", "2"],  # no tenant named
        ["tenants", "demo", "acme", "--reset", "--weight", "2"],
        ["tenants", "demo", "nobody"],
        ["tenants", "bad queue!", "acme", "--weight", "2"],
        ["queue", "bad queue!", "--weight", "2"],
    ],
)
def test_bad_values_exit_2_and_change_nothing(store: Store, args: list[str]) -> None:
    store.enqueue("acme")
    store.app.set_tenant("demo", "acme", weight=2, max_running=3)
    before = (store.snapshot(), store.app.backend.get_queue(GetQueueParams(queue="demo")))
    result = store.run(*args)
    assert result.exit_code == 2, result.output
    assert "Error" in result.output and "Traceback" not in result.output
    assert (store.snapshot(), store.app.backend.get_queue(GetQueueParams(queue="demo"))) == before
