"""A job declaration as published to the store (``JobType``), so a producer can enqueue by name
alone and refuse arguments the worker could never call it with (``JobSignature``), instead of
the job going dead when it runs.

``JobType.params`` holds the positional parameter names in order (what finding a tenant
argument needs); ``JobType.signature`` the rest of the shape. Declarations published without a
signature (by an older fairq) cannot be checked, and the caller is told so.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fairq.policy.throttle import Throttle

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True, kw_only=True)
class JobType:
    """A job declaration as published to the store, so producers can enqueue by name alone."""

    name: str
    queue: str
    tenant_arg: str | None  # the argument holding the tenant; None when a callable finds it
    params: Sequence[str] = field(default_factory=tuple)  # positional parameter names, in order
    signature: JobSignature | None = None  # the rest of its shape; None: from an older fairq
    max_attempts: int
    lease_timeout: float
    cost: float
    throttle: Sequence[Throttle] = ()
    learn_cost: bool = True  # False: its jobs are always charged ``cost`` (fairq.policy.cost)


@dataclass(frozen=True, kw_only=True)
class PublishJobTypesParams:
    types: Sequence[JobType]


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


def positional_params(signature: inspect.Signature) -> tuple[str, ...]:
    """``JobType.params`` for a function: its positional parameter names, in order."""
    return tuple(p.name for p in signature.parameters.values() if p.kind in _POSITIONAL)
