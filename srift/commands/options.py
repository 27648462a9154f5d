"""What several `srift` commands declare alike: their shared options, and how a command group is added.

Each option is an `Annotated` alias a command's parameter takes as its type (`url: ServerUrl = None`); the
default stays in the command's signature. An option whose help text differs between commands is declared
in its command's module instead, so every `--help` reads as before.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import typer

from srift.errors import SriftError

ServerUrl = Annotated[
    str | None,
    typer.Option(
        "--url", help="talk to a running server (e.g. http://127.0.0.1:8000) instead of the local database"
    ),
]
"""`srift plan`, `srift predict`, `srift run`, `srift jobs` and `srift models`: the REST paths of a server
instead of the local database (plan and predict send their request there instead of computing it here)."""

WriteToken = Annotated[
    str | None, typer.Option("--token", help="API write token for --url (default: $SRIFT_TOKEN)")
]
"""`srift plan` and `srift models train`/`activate`: the token a write to a server carries (`env_token`
falls back to SRIFT_TOKEN, so typer shows no environment variable)."""

ReadToken = Annotated[
    str | None,
    typer.Option("--token", help="API token for --url when reads need one (default: $SRIFT_TOKEN)"),
]
"""`srift predict` and `srift models list`: the token a read from a server carries where the server asks one
(SRIFT_READ_REQUIRES_TOKEN); `env_token` falls back to SRIFT_TOKEN."""

UrlToken = Annotated[str | None, typer.Option("--token", envvar="SRIFT_TOKEN", help="API token for --url")]
"""`srift jobs` and `srift probe run --quick`: the token their requests to a server's job queue carry (typer's
help adds the environment variable)."""

Region = Annotated[str | None, typer.Option("--region", help="e.g. us-east-1")]
"""`srift catalog list` and `srift probe import`: a provider's region."""

ExampleFlag = Annotated[bool, typer.Option("--example", help="print an example request file and exit")]

JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON")]


def add_group(
    app: typer.Typer, name: str, *, help: str, commands: Mapping[str, Callable[..., Any]] | None = None
) -> typer.Typer:
    """A command group `srift <name> ...` (its bare name prints its help) with `commands` (verb: function,
    listed in this order), added to `app`."""
    group = typer.Typer(help=help, no_args_is_help=True)
    for verb, command in (commands or {}).items():
        group.command(verb)(command)
    app.add_typer(group, name=name)
    return group


def in_cli_words(
    options: Mapping[str, str],
    *,
    phrases: Mapping[str, str] | None = None,
    hints: Mapping[str, str] | None = None,
    given: Mapping[str, str] | None = None,
    file: str | None = None,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate a command so its errors speak the command line's words. The services' errors are shared
    with the API and name the request's fields (`time_limit_s`) and REST paths (POST /v1/jobs); this
    restates each at the CLI edge: `options` maps a request field to the command's option (the error's
    field, and the field's name in the hint), `phrases` an API phrase in a hint to the CLI's, and `hints`
    a whole API hint to the CLI's (where the fix on the command line is another one).

    `given` maps an option that only overrides the request FILE's field to the command's parameter for
    it: that option is named only when the user gave it, else the error names the file's field (a bad
    `network.transport` in FILE is FILE's, `--transport udp` the flag's). `file` names the parameter of a
    command whose request may come from a file too (`--file`): without one given, every field came from
    the flags, so "X is missing" reads as click says a required option was not given."""
    fixed = {**(phrases or {})}

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def speaking(*args: Any, **kwargs: Any) -> None:
            try:
                command(*args, **kwargs)
            except SriftError as exc:
                named = {
                    field: option
                    for field, option in options.items()
                    if option not in (given or {}) or _was_given(kwargs.get((given or {})[option]))
                }
                hint = (hints or {}).get(exc.hint)
                if hint is None:
                    hint = _restated(exc.hint, {**named, **fixed})
                field = named.get(exc.field or "", exc.field)
                flags_only = not (file and _was_given(kwargs.get(file)))
                missing = field != exc.field and exc.detail == f"{exc.field} is missing" and flags_only
                detail = "this option is required and was not given" if missing else None
                exc.restate(hint=hint, field=field, detail=detail)
                raise

        return speaking

    return decorate


def _was_given(value: Any) -> bool:
    """Whether a command's parameter holds what the user typed (not its default: None, False or [])."""
    return value is not None and value is not False and value != []


def _restated(text: str, words: Mapping[str, str]) -> str:
    """`text` with each of `words` (a whole word, not part of a path or option) said as it maps."""
    if not words:
        return text
    pattern = re.compile("|".join(rf"(?<![\w/-]){re.escape(w)}(?![\w/])" for w in words))
    return pattern.sub(lambda m: words[m.group(0)], text)


def finite_number(option: str, *, within: tuple[float, float] | None = None) -> Callable[[str], float]:
    """A typer `parser` for a float option: the number, or InvalidInput naming `option` for text that is
    not one, for nan and ±inf ("is not a number", where a range check would call nan too large), and for
    a value outside `within` (low, high; high math.inf for a lower bound only; checked here, as typer does
    not range-check an option with a parser)."""
    from srift.errors import InvalidInput

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            kind = "a finite number" if math.isinf(value) else "a number"
            raise InvalidInput(f"{text} is not {kind}", hint=f"give {option} a decimal number", field=option)
        if within is not None and not within[0] <= value <= within[1]:
            low, high = within
            if math.isinf(high):
                raise InvalidInput(
                    f"{text} is below {low:g}",
                    hint=f"give {option} a number of at least {low:g}",
                    field=option,
                )
            raise InvalidInput(
                f"{text} is outside {low:g}..{high:g}",
                hint=f"give {option} a number from {low:g} to {high:g}",
                field=option,
            )
        return value

    return parse
