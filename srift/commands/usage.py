"""How the `srift` command line reports an error: one line, `error: <field>: <reason>. To fix: <hint>.`

Srift's own errors (SriftError) read that way; click's usage errors (an unknown option, an option without
its value, a number outside an option's range, an unknown command) would print typer's boxed usage block
instead. `SriftGroup`, the root command's class, restates each of those in Srift's words at one place, for
every command below it, and keeps click's exit code 2 for them. `--help` is untouched.
"""

from __future__ import annotations

import re
import sys
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from srift.commands.helptext import argument_name, click_usage, reflow_help
from srift.errors import InvalidInput, SriftError

try:  # typer ≥ 0.2x carries its own copy of click; before, it used click itself
    from typer._click import Context
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - the locked typer has it
    from click import Context  # type: ignore[assignment]
    from click import exceptions as click_errors  # type: ignore[no-redef]

err_console = Console(stderr=True)

_NO_ARGS_IS_HELP: tuple[type[BaseException], ...] = tuple(
    kind for kind in [getattr(click_errors, "NoArgsIsHelpError", None)] if kind is not None
)
"""A command group called bare raises this to print its help (click ≥ 8.2); it is no error to restate."""


def report(exc: SriftError) -> NoReturn:
    """Print `exc` as the CLI's one error line on stderr and exit with its exit code."""
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    sys.exit(exc.exit_code)


def _parameter_name(param: Any) -> str | None:
    """How the user typed `param`: an option's long form (`--min-gpus`), an argument's metavar (`RUN_ID`)."""
    if param is None:
        return None
    opts = [opt for opt in getattr(param, "opts", []) if opt.startswith("-")]
    if opts:
        return str(max(opts, key=len))
    return argument_name(param).upper()


def _sentence(text: str) -> str:
    """click's message as the middle of Srift's line: no trailing period, a lower-case first letter, and a
    suggestion in brackets (click's "No such command 'lst'. Did you mean 'list'?")."""
    text = re.sub(r"\.\s+Did you mean (.+)\?$", r" (did you mean \1?)", text.strip()).rstrip(".")
    return text[:1].lower() + text[1:]


def _value_given(exc: click_errors.BadParameter) -> str | None:
    """The value the user gave that `exc` refuses, as typed: typer checks a value's type and range with
    pydantic and raises BadParameter from its ValidationError, whose first error holds the input (one item
    of a repeated option). None when `exc` has no such cause (click's own types name the value already)."""
    from pydantic import ValidationError

    cause = exc.__cause__
    if not isinstance(cause, ValidationError):
        return None
    errors = cause.errors()
    if not errors or "input" not in errors[0]:
        return None
    value = errors[0]["input"]
    text = str(value)
    try:
        float(text)
    except ValueError:
        return repr(value)  # quoted, control characters escaped
    return text


def _with_value_given(reason: str, exc: click_errors.BadParameter) -> str:
    """`reason` (pydantic's "input should be ...", "value error, ...") naming the value the user gave:
    "0 should be greater than or equal to 1", "'many' should be a valid integer"; another reason gets the
    value after it ("..., got 'x'") unless it quotes it already."""
    reason = reason.removeprefix("value error, ")
    given = _value_given(exc)
    if given is None:
        return reason
    if reason.startswith("input "):
        return given + reason.removeprefix("input")
    return reason if given in reason else f"{reason}, got {given}"


def _command_path(exc: click_errors.UsageError) -> str:
    """The command whose arguments `exc` is about (`srift catalog list`): its context, which `SriftContext`
    attaches where click's parser raised without one."""
    return str(exc.ctx.command_path) if exc.ctx is not None else "srift"


class SriftContext(Context):
    """click's context for every `srift` command. click's parser raises some usage errors (an option given a
    value it takes none, or none where it needs one) without a context, inside the context's own scope
    (`Command.make_context` parses under `with ctx.scope(...)`); on the way out this context names itself
    as theirs, so the error can say which command's `--help` to run."""

    def __exit__(self, exc_type: Any, exc_value: Any, tb: Any) -> None:
        if isinstance(exc_value, click_errors.UsageError) and exc_value.ctx is None:
            exc_value.ctx = self
        super().__exit__(exc_type, exc_value, tb)


def _use_srift_context(command: Any) -> None:
    """Give `command` and every command below it `SriftContext`."""
    command.context_class = SriftContext
    for sub in getattr(command, "commands", {}).values():
        _use_srift_context(sub)


def in_srift_words(exc: click_errors.UsageError) -> InvalidInput:
    """click's usage error `exc` as an InvalidInput: the option or argument at fault as its field, click's
    reason as its detail, and a hint naming the command's `--help`."""
    command = _command_path(exc)
    see_help = f"run `{command} --help`"
    if isinstance(exc, click_errors.MissingParameter):
        name = _parameter_name(exc.param)
        kind = exc.param_type or getattr(exc.param, "param_type_name", "parameter")
        return InvalidInput(
            f"this {kind} is required and was not given",
            hint=f"give {name}; {see_help} for what it takes",
            field=name,
        )
    if isinstance(exc, click_errors.BadParameter):
        name = _parameter_name(exc.param)
        hint = f"give {name} another value; {see_help} for what it takes" if name else see_help
        return InvalidInput(_with_value_given(_sentence(exc.message), exc), hint=hint, field=name)
    if isinstance(exc, click_errors.NoSuchOption):
        guesses = sorted(exc.possibilities or [])
        guess = f" (did you mean {' or '.join(guesses)}?)" if guesses else ""
        return InvalidInput(
            f"`{command}` has no such option{guess}",
            hint=f"{see_help} for its options",
            field=exc.option_name,
        )
    if isinstance(exc, click_errors.BadOptionUsage):
        said = exc.message.replace(f"Option {exc.option_name!r} ", "", 1)
        said = said.replace("requires an argument", "needs a value")
        return InvalidInput(
            _sentence(said), hint=f"{see_help} for how to give {exc.option_name}", field=exc.option_name
        )
    return InvalidInput(_sentence(exc.message), hint=see_help)


class SriftGroup(TyperGroup):
    """The root `srift` command: click's usage errors, raised while it or any command below it reads its
    arguments, print as Srift's one error line (exit 2, click's usage code) instead of typer's box; every
    command's docstring help is reflowed to the terminal's width, and its usage line writes arguments as
    click does (srift.commands.helptext)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        reflow_help(self)
        click_usage(self)
        _use_srift_context(self)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except _NO_ARGS_IS_HELP:
            raise
        except click_errors.UsageError as exc:
            _refuse(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _NO_ARGS_IS_HELP:
            raise
        except click_errors.UsageError as exc:
            _refuse(exc)


def _refuse(exc: click_errors.UsageError) -> NoReturn:
    """Report click's usage error `exc` in Srift's words, with click's exit code (2)."""
    error = in_srift_words(exc)
    error.exit_code = exc.exit_code
    report(error)
