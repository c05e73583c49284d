"""The tenant table: sorted, searched and cut into pages on the server.

A queue may have 10,000 tenants or more; the page shows one page of rows, so the browser never
holds more than that. Rows are ``fairq.reports.queues.tenant_row`` dicts (what ``fairq stats
--json`` prints), so the table and the CLI always agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fairq.errors import ConfigError
from fairq.policy.bounds import read_int

PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
SEARCH_CHARS = 200


def _none_high(value: float | None) -> float:
    """A cap or rate of None is no limit: it sorts above every number."""
    return math.inf if value is None else float(value)


def _rate_per_second(row: Mapping[str, Any]) -> float:
    rate = row.get("rate_per_second")
    return _none_high(rate)


def _optional(key: str) -> Callable[[Mapping[str, Any]], float]:
    """Figures that may be missing (no wait measured yet) sort below every number."""
    return lambda row: -math.inf if row.get(key) is None else float(row[key])


#: Column name → sort key. Every column of the table can be sorted by.
SORT_KEYS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "tenant": lambda row: row["tenant"],
    "weight": lambda row: row["weight"],
    "cap": lambda row: _none_high(row["max_running"]),
    "rate": _rate_per_second,
    "ready": lambda row: row["ready"],
    "scheduled": lambda row: row["scheduled"],
    "running": lambda row: row["running"],
    "succeeded": lambda row: row["succeeded"],
    "failed": lambda row: row["failed"],
    "dead": lambda row: row["dead"],
    "oldest": _optional("oldest_ready_age"),
    "wait50": _optional("wait_p50"),
    "wait99": _optional("wait_p99"),
    "perminute": _optional("jobs_per_minute"),
    "eta": _optional("next_start_estimate"),
    "share": lambda row: row["share"],
    "status": lambda row: row["status"],
}
DEFAULT_SORT = "ready"


@dataclass(frozen=True)
class TableQuery:
    """What the person asked for: search text, status filter, sort column and order, page."""

    search: str = ""
    status: str = ""
    sort: str = DEFAULT_SORT
    descending: bool = True
    page: int = 1
    size: int = DEFAULT_PAGE_SIZE

    @classmethod
    def of(cls, params: Mapping[str, str], sort_keys: Mapping[str, object]) -> TableQuery:
        """Read the query string. An unknown sort column or order falls back to the default (a
        link from an older page); a page or size that is not a number is a ConfigError. Empty
        is absent."""
        sort = params.get("sort", DEFAULT_SORT)
        size = read_int(params.get("size") or str(DEFAULT_PAGE_SIZE), "size")
        if size not in PAGE_SIZES:
            sizes = ", ".join(str(n) for n in PAGE_SIZES)
            raise ConfigError(f"size: {size:,} rows is not a page size; choose one of {sizes}")
        return cls(
            search=params.get("q", "")[:SEARCH_CHARS],
            status=params.get("status", "")[:SEARCH_CHARS],
            sort=sort if sort in sort_keys else DEFAULT_SORT,
            descending=params.get("dir", "desc") != "asc",
            page=read_int(params.get("page") or "1", "page"),
            size=size,
        )

    def link(self, **changes: object) -> dict[str, str]:
        """The query string of this view with ``changes`` (for sort, page and size links)."""
        fields = {
            "q": self.search,
            "status": self.status,
            "sort": self.sort,
            "dir": "desc" if self.descending else "asc",
            "page": str(self.page),
            "size": str(self.size),
        }
        fields.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in fields.items() if v}

    def sort_link(self, column: str) -> dict[str, str]:
        """Sort by ``column``; again on the same column flips the order. Back to page 1."""
        descending = not self.descending if column == self.sort else column != "tenant"
        return self.link(sort=column, dir="desc" if descending else "asc", page=1)


@dataclass(frozen=True)
class TablePage:
    rows: list[dict[str, Any]]
    matching: int  # rows that match the search and filter
    total: int  # rows before the search and filter
    page: int
    pages: int
    first: int  # 1-based number of the first row shown (0 when none)
    last: int


def table_page(
    rows: list[dict[str, Any]],
    query: TableQuery,
    sort_keys: Mapping[str, Callable[[Mapping[str, Any]], Any]] = SORT_KEYS,
) -> TablePage:
    """Filter, sort (ties by tenant id, so pages are stable) and cut one page."""
    needle = query.search.casefold()
    chosen = [
        row
        for row in rows
        if (not needle or needle in row["tenant"].casefold())
        and (not query.status or row["status"] == query.status)
    ]
    chosen.sort(key=lambda row: row["tenant"])
    chosen.sort(key=sort_keys[query.sort], reverse=query.descending)
    pages = max(1, math.ceil(len(chosen) / query.size))
    page = min(query.page, pages)
    start = (page - 1) * query.size
    shown = chosen[start : start + query.size]
    return TablePage(
        rows=shown,
        matching=len(chosen),
        total=len(rows),
        page=page,
        pages=pages,
        first=start + 1 if shown else 0,
        last=start + len(shown),
    )
