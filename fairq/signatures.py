"""A job's signature as published with its declaration, so a producer that enqueues by name
(``fairq enqueue``, an App that does not declare the job) can refuse arguments the worker
could never call it with, instead of the job going dead when it runs.

``JobType.params`` holds the positional parameter names in order, which is what finding a
tenant argument needs; after them comes one entry, ``SIGNATURE_MARK`` + JSON, with the rest of
the shape: how many positionals are positional-only and required, the keyword-only names
(required or not), and whether ``*args`` / ``**kwargs`` are taken. No identifier starts with
``*``, so older readers that look names up in ``params`` are not misled by it; declarations
published without it (by an older fairq) cannot be checked, and the caller is told so.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from fairq.errors import JobArgumentsError

SIGNATURE_MARK = "*signature:"
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_OPTIONAL = object()  # the default of a parameter that has one (its value is not published)


def published_params(signature: inspect.Signature) -> tuple[str, ...]:
    """``JobType.params`` for a function: its positional names, then its shape."""
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    shape = {
        "positional_only": sum(p.kind is p.POSITIONAL_ONLY for p in params),
        "required": sum(p.default is p.empty for p in positional),
        "var_positional": any(p.kind is p.VAR_POSITIONAL for p in params),
        "keyword_only": {p.name: p.default is p.empty for p in params if p.kind is p.KEYWORD_ONLY},
        "var_keyword": any(p.kind is p.VAR_KEYWORD for p in params),
    }
    mark = SIGNATURE_MARK + json.dumps(shape, separators=(",", ":"))
    return (*(p.name for p in positional), mark)


def positional_names(params: Sequence[str]) -> list[str]:
    """The positional parameter names among published ``params``."""
    return [name for name in params if not name.startswith(SIGNATURE_MARK)]


def check_published_call(
    name: str, params: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> bool:
    """Refuse arguments that do not fit a published job; False when it cannot be checked."""
    shape = next((p[len(SIGNATURE_MARK) :] for p in params if p.startswith(SIGNATURE_MARK)), None)
    if shape is None:
        return False
    signature = _rebuilt(positional_names(params), json.loads(shape))
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise JobArgumentsError(
            f"arguments do not fit job {name!r} as its workers declare it: {exc}"
        ) from None
    return True


def _rebuilt(positional: list[str], shape: dict[str, Any]) -> inspect.Signature:
    P = inspect.Parameter
    taken = set(positional) | set(shape["keyword_only"])
    parameters = [
        P(
            n,
            P.POSITIONAL_ONLY if i < shape["positional_only"] else P.POSITIONAL_OR_KEYWORD,
            default=P.empty if i < shape["required"] else _OPTIONAL,
        )
        for i, n in enumerate(positional)
    ]
    if shape["var_positional"]:
        parameters.append(P(_unused("args", taken), P.VAR_POSITIONAL))
    for n, required in shape["keyword_only"].items():
        parameters.append(P(n, P.KEYWORD_ONLY, default=P.empty if required else _OPTIONAL))
    if shape["var_keyword"]:
        parameters.append(P(_unused("kwargs", taken), P.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _unused(base: str, taken: set[str]) -> str:
    """A name for ``*args``/``**kwargs`` that no named parameter has (only its kind matters)."""
    name = base
    while name in taken:
        name = "_" + name
    return name
