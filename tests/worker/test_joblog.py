"""What the worker writes into logs: no secrets, bounded tenant text."""

from __future__ import annotations

from fairq.worker.joblog import show_tenant


def test_tenants_are_shown_as_repr_cut_to_100_characters() -> None:
    assert show_tenant("acme") == "'acme'"
    assert show_tenant("a\nb") == "'a\\nb'"
    long = show_tenant("x" * 500)
    assert len(long) == 100
    assert long.endswith("…")
