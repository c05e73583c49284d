"""The named queries come from several files of queries/, one set with each name once."""

from __future__ import annotations

from importlib.resources import files

import pytest

from fairq.backends._sql import parse_queries
from fairq.backends.postgres.sql import PACKAGE, merge_queries, queries_for

A = "-- name: first\nSELECT 1\n\n-- name: shared\nSELECT 2\n"
B = "-- name: second\nSELECT 3\n"


def test_the_files_make_one_set_of_names() -> None:
    merged = merge_queries([("a.sql", A), ("b.sql", B)])
    assert dict(merged) == {"first": "SELECT 1", "shared": "SELECT 2", "second": "SELECT 3"}


def test_a_name_in_two_files_is_refused_naming_both() -> None:
    with pytest.raises(
        ValueError, match=r"'shared' is defined in queries/a\.sql and in queries/c\.sql"
    ):
        merge_queries([("a.sql", A), ("b.sql", B), ("c.sql", "-- name: shared\nSELECT 4\n")])


def test_the_store_reads_every_file_of_queries() -> None:
    folder = files(PACKAGE).joinpath("queries")
    each = [parse_queries(f.read_text(encoding="utf-8")) for f in folder.iterdir()]
    assert len(each) > 5 and all(len(names) > 0 for names in each)
    assert set(queries_for("s")) == {name for names in each for name in names}
