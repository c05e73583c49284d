"""Every option of every ``fairq`` command that takes a whole number reads it with one reader
(``fairq.cli.numbers.Whole`` over ``fairq.policy.bounds.read_int``), and any text given to it
is either that number or a one-line refusal naming the option: never a traceback (issue #31).
"""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fairq.cli.admin
import fairq.cli.dashboard
import fairq.cli.demo
import fairq.cli.migrate
import fairq.cli.relay
import fairq.cli.simulate
import fairq.cli.worker  # noqa: F401  (each registers its commands)
from fairq.cli import cli
from fairq.cli.numbers import Duration, Whole
from fairq.policy.bounds import read_int

NASTY = ["²", "①", "١٢", "1_000", "+7", " 7 ", "9" * 5000, "1e3", "0x10", "\x00", "-0", ""]


def commands(
    group: click.Group = cli, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def number_options() -> list[tuple[tuple[str, ...], click.Command, click.Option]]:
    return [
        (path, command, param)
        for path, command in commands()
        for param in command.params
        if isinstance(param, click.Option) and isinstance(param.type, (Whole, Duration))
    ]


OPTIONS = number_options()


def test_no_option_reads_an_int_any_other_way() -> None:
    """click's own INT and IntRange accept ``١٢`` and ``+7``: no command uses them."""
    for path, command in commands():
        for param in command.params:
            assert not isinstance(param.type, click.types.IntParamType), (path, param.name)
    names = {(" ".join(path), param.opts[-1]) for path, _, param in OPTIONS}
    assert ("tenants", "--max-running") in names and ("worker", "--concurrency") in names
    assert len(names) >= 15


def parse(path: tuple[str, ...], command: click.Command, option: click.Option, value: str):  # type: ignore[no-untyped-def]
    """Parse one command line the way ``fairq`` does, up to running the command."""
    arguments = ["x"] * sum(
        1 for p in command.params if isinstance(p, click.Argument) and p.required
    )
    ctx = command.make_context(" ".join(path), [*arguments, option.opts[-1], value])
    return ctx.params[option.name or ""]


@settings(max_examples=400, deadline=None)
@given(
    target=st.sampled_from(OPTIONS),
    value=st.one_of(
        st.sampled_from(NASTY),
        st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
        st.integers(-(2**40), 2**40).map(str),
    ),
)
@example(target=next(o for o in OPTIONS if o[2].opts[-1] == "--max-running"), value="²")
def test_any_text_is_the_number_or_a_one_line_refusal(
    target: tuple[tuple[str, ...], click.Command, click.Option], value: str
) -> None:
    path, command, option = target
    try:
        parsed = parse(path, command, option, value)
    except click.BadParameter as exc:
        message = exc.format_message()
        assert message and "\n" not in message.strip()
        assert exc.param is option
        return
    if isinstance(option.type, Whole) and parsed is not None:
        kind = option.type
        assert parsed == read_int(value, least=kind.least, most=kind.most)
    else:
        assert parsed is None or parsed > 0


@pytest.mark.parametrize(("path", "option"), [(p, o) for p, _, o in OPTIONS], ids=str)
def test_each_option_takes_a_plain_number(path: tuple[str, ...], option: click.Option) -> None:
    """The harness above reaches every option: a plain valid number parses."""
    command = next(c for p, c in commands() if p == path)
    kind = option.type
    good = str(max(kind.least, 1)) if isinstance(kind, Whole) else "60"
    parsed = parse(path, command, option, good)
    assert parsed == (int(good) if isinstance(kind, Whole) else 60.0)
