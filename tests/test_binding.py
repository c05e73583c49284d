"""A declared job's calls are bound once per declaration's reading of its signature
(``fairq.app.signatures.Binder``): every call gets exactly what ``inspect`` gives, the arguments by
name with defaults filled in, or inspect's own TypeError, which enqueue reports."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fairq import App
from fairq.app.signatures import Binder
from fairq.errors import JobArgumentsError
from fairq.job import decode_payload


def plain(tenant: str, n: int, note: str = "none", *, unused: None = None) -> None: ...


def named(tenant: str, n: int, note: str = "none", flag: bool = False) -> None: ...


def nothing() -> None: ...


def only_positional(tenant: str, /, n: int = 1) -> None: ...


def varargs(tenant: str, *rest: int, **extra: Any) -> None: ...


def keyword(tenant: str, *, n: int, note: str = "x") -> None: ...


FUNCTIONS: list[Callable[..., None]] = [plain, named, nothing, only_positional, varargs, keyword]

CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    (("acme",), {}),
    (("acme", 1), {}),
    (("acme", 1, "hi"), {}),
    (("acme", 1, "hi", True), {}),
    (("acme", 1, "hi", True, 5), {}),
    (("acme",), {"n": 1}),
    (("acme",), {"n": 1, "flag": True}),
    ((), {"tenant": "acme", "n": 1}),
    ((), {"n": 1, "tenant": "acme", "note": "hi"}),
    (("acme", 1), {"tenant": "other"}),  # given twice
    (("acme", 1), {"n": 2}),  # given twice
    (("acme", 1), {"unknown": 2}),
    (("acme",), {"note": "hi"}),  # n missing
    ((), {"n": 1}),  # tenant missing
    (("acme", 1), {"unused": None}),
    (("acme", 1), {"rest": 3}),
]


def inspected(fn: Callable[..., None], args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        return f"TypeError: {exc}"
    bound.apply_defaults()
    return list(bound.arguments.items())  # the order too


def bound_by(binder: Binder, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    try:
        return list(binder.bind(args, kwargs).items())
    except TypeError as exc:
        return f"TypeError: {exc}"


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_every_call_binds_as_inspect_binds_it(fn: Callable[..., None]) -> None:
    binder = Binder(inspect.signature(fn))
    for args, kwargs in CALLS:
        assert bound_by(binder, args, kwargs) == inspected(fn, args, kwargs), (args, kwargs)


def test_only_signatures_of_named_parameters_take_the_dict_binding() -> None:
    """The others (``/``, ``*``, ``*args``, ``**kwargs``) are left to inspect whole."""
    shapes = {fn.__name__: Binder(inspect.signature(fn)).plain for fn in FUNCTIONS}
    assert shapes == {
        "plain": False,
        "named": True,
        "nothing": True,
        "only_positional": False,
        "varargs": False,
        "keyword": False,
    }


@pytest.fixture
def app(tmp_path: Path) -> App:
    made = App(f"sqlite:///{tmp_path}/binding.db")

    @made.job(name="named", tenant="tenant", unique_for=60, unique_key="{tenant}:{note}")
    def named_job(tenant: str, n: int, note: str = "none", flag: bool = False) -> None: ...

    return made


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("acme",), {}, "missing a required argument: 'n'"),
        (("acme", 1, "a", True, 5), {}, "too many positional arguments"),
        (("acme", 1), {"n": 2}, "multiple values for argument 'n'"),
        (("acme", 1), {"unknown": 2}, "got an unexpected keyword argument 'unknown'"),
    ],
)
def test_enqueue_refuses_a_call_that_does_not_fit_with_inspects_message(
    app: App, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    job = app.jobs["named"]
    with pytest.raises(JobArgumentsError) as raised:
        job.enqueue(*args, **kwargs)
    assert str(raised.value) == f"arguments do not fit job 'named': {message}"
    assert app.stats() == []  # nothing stored
    app.close()


def test_the_tenant_and_unique_key_read_arguments_given_by_keyword_or_by_default(
    app: App,
) -> None:
    job = app.jobs["named"]
    first = job.enqueue(n=1, tenant="acme")  # key "acme:none": note's default
    assert job.enqueue("acme", 2, note="none") == first  # the same key: not stored again
    other = job.enqueue("acme", 3, note="hi")
    assert other != first
    stored = {info.id: info for info in (app.job_info(first), app.job_info(other)) if info}
    assert {i.tenant for i in stored.values()} == {"acme"}
    assert decode_payload(stored[first].payload) == ([], {"n": 1, "tenant": "acme"})
    app.close()
