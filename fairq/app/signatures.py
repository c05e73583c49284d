"""Binding an enqueue's arguments to a job's signature: the function's own (``Binder``), or the
one its workers published (``check_published_call``, fairq/contract/jobtypes.py), so arguments
the worker could never call the job with are refused at the enqueue.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from fairq.contract.jobtypes import JobSignature
from fairq.errors import JobArgumentsError

_OPTIONAL = object()  # the default of a parameter that has one (its value is not published)


class Binder:
    """Binds calls to a signature as ``Signature.bind`` and ``apply_defaults`` do, reading the
    signature once: a function whose parameters are all named and taken by position or
    keyword (most jobs) binds with a dict; any other signature, and any call that does not
    fit, goes through ``Signature.bind`` itself, so the TypeError is always inspect's own."""

    def __init__(self, signature: inspect.Signature) -> None:
        self.signature = signature
        params = signature.parameters.values()
        #: Every parameter named and taken by position or keyword: the dict binds its calls.
        self.plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        self.names = tuple(signature.parameters)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Each parameter's value, in the signature's order, defaults filled in; TypeError
        (inspect's) for a call that does not fit."""
        names = self.names
        if self.plain and len(args) <= len(names):
            arguments = dict(zip(names, args, strict=False))  # names may be more
            taken = 0
            for name in names[len(args) :]:
                if name in kwargs:
                    arguments[name] = kwargs[name]
                    taken += 1
                elif name in self.defaults:
                    arguments[name] = self.defaults[name]
                else:
                    break  # a required argument is missing: inspect names it
            else:
                if taken == len(kwargs):  # else one is unknown, or given twice
                    return arguments
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.arguments


def check_published_call(
    name: str,
    params: Sequence[str],
    signature: JobSignature | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> bool:
    """Refuse arguments that do not fit a published job; False when it cannot be checked."""
    if signature is None:
        return False
    try:
        _rebuilt(list(params), signature).bind(*args, **kwargs)
    except TypeError as exc:
        raise JobArgumentsError(
            f"arguments do not fit job {name!r} as its workers declare it: {exc}"
        ) from None
    return True


def _rebuilt(positional: list[str], shape: JobSignature) -> inspect.Signature:
    P = inspect.Parameter
    taken = set(positional) | set(shape.keyword_only)
    parameters = [
        P(
            n,
            P.POSITIONAL_ONLY if i < shape.positional_only else P.POSITIONAL_OR_KEYWORD,
            default=P.empty if i < shape.required else _OPTIONAL,
        )
        for i, n in enumerate(positional)
    ]
    if shape.var_positional:
        parameters.append(P(_unused("args", taken), P.VAR_POSITIONAL))
    for n, required in shape.keyword_only.items():
        parameters.append(P(n, P.KEYWORD_ONLY, default=P.empty if required else _OPTIONAL))
    if shape.var_keyword:
        parameters.append(P(_unused("kwargs", taken), P.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _unused(base: str, taken: set[str]) -> str:
    """A name for ``*args``/``**kwargs`` that no named parameter has (only its kind matters)."""
    name = base
    while name in taken:
        name = "_" + name
    return name
