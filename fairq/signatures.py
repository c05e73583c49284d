"""A job's signature as published with its declaration, so a producer that enqueues by name
(``fairq enqueue``, an App that does not declare the job) can refuse arguments the worker
could never call it with, instead of the job going dead when it runs.

``JobType.params`` holds the positional parameter names in order (what finding a tenant
argument needs); ``JobType.signature`` the rest of the shape. Declarations published without a
signature (by an older fairq) cannot be checked, and the caller is told so.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fairq.errors import JobArgumentsError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_OPTIONAL = object()  # the default of a parameter that has one (its value is not published)


@dataclass(frozen=True, kw_only=True)
class JobSignature:
    """The shape of a job function's parameters beyond the positional names: enough to bind a
    call without the function. Default values are not published, only whether there is one."""

    positional_only: int = 0  # the first this many positional names are positional-only
    required: int = 0  # the first this many positional names have no default
    var_positional: bool = False  # takes *args
    keyword_only: Mapping[str, bool] = field(default_factory=dict)  # name -> required
    var_keyword: bool = False  # takes **kwargs

    @classmethod
    def of(cls, signature: inspect.Signature) -> JobSignature:
        params = list(signature.parameters.values())
        positional = [p for p in params if p.kind in _POSITIONAL]
        return cls(
            positional_only=sum(p.kind is p.POSITIONAL_ONLY for p in params),
            required=sum(p.default is p.empty for p in positional),
            var_positional=any(p.kind is p.VAR_POSITIONAL for p in params),
            keyword_only={p.name: p.default is p.empty for p in params if p.kind is p.KEYWORD_ONLY},
            var_keyword=any(p.kind is p.VAR_KEYWORD for p in params),
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "positional_only": self.positional_only,
                "required": self.required,
                "var_positional": self.var_positional,
                "keyword_only": dict(self.keyword_only),
                "var_keyword": self.var_keyword,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | None) -> JobSignature | None:
        """None for a declaration stored without one (published by an older fairq)."""
        if text is None:
            return None
        data = json.loads(text)
        return cls(
            positional_only=int(data["positional_only"]),
            required=int(data["required"]),
            var_positional=bool(data["var_positional"]),
            keyword_only={str(k): bool(v) for k, v in data["keyword_only"].items()},
            var_keyword=bool(data["var_keyword"]),
        )


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


def positional_params(signature: inspect.Signature) -> tuple[str, ...]:
    """``JobType.params`` for a function: its positional parameter names, in order."""
    return tuple(p.name for p in signature.parameters.values() if p.kind in _POSITIONAL)


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
