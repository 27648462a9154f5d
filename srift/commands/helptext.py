"""How a command's docstring becomes its `--help` text: paragraphs reflowed to the terminal's width.

Commands take their help from docstrings, wrapped in the source at 110 columns. click treats a single line
break inside a paragraph as a space and keeps a paragraph marked `\\b` as written; typer's rich help keeps
every line break after the first paragraph, so at 80 columns each long source line wrapped into a full
line and a stub. `reflowed` restores click's rule for the rich help: a paragraph (text between blank lines)
is one line that rich wraps to the terminal, and a paragraph with an indented line (the examples, a YAML
sample) or one that starts with a `\\b` line is kept verbatim. Examples must fit 80 columns themselves:
break a long one with a shell `\\` continuation.

`ClickUsageArgument` writes an argument in the usage line as click does and as our docs do (`srift predict
FILE`): its metavar, else its name in capitals, in brackets when optional, `...` when it takes several.
typer's own usage line wrote a required argument as `{file}`, which reads as a template left unfilled. The
help's Arguments panel (and click's error text) names it the same way (`FILE`, not typer's `file`).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from typer.core import TyperArgument

_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_VERBATIM = "\b"
"""click's marker: a paragraph whose first line is only this character is printed as written."""


def reflowed(text: str) -> str:
    """`text` (a docstring) with each prose paragraph on one line; verbatim paragraphs kept line by line
    (the `\\b` marker dropped); anything after click's `\\f` cut left as it is."""
    body, cut, rest = inspect.cleandoc(text).partition("\f")
    paragraphs = []
    for paragraph in _BLANK_LINE.split(body.strip("\n")):
        lines = paragraph.split("\n")
        if lines[0] == _VERBATIM:
            paragraphs.append("\n".join(lines[1:]))
        elif any(line[:1].isspace() for line in lines):
            paragraphs.append(paragraph)
        else:
            paragraphs.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs) + cut + rest


def reflow_help(command: Any) -> None:
    """Reflow the help of `command` and of every command below it (a click command or group)."""
    if command.help:
        command.help = reflowed(command.help)
    for sub in getattr(command, "commands", {}).values():
        reflow_help(sub)


class ClickUsageArgument(TyperArgument):
    """A typer argument whose usage-line piece is click's: `FILE`, `[FILE]`, `FILE...` (module docstring),
    and whose name in the help's Arguments panel and in click's error text is the same `FILE`."""

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [usage_piece(self)]

    @property
    def display_name_raw(self) -> str:
        """The name typer's rich help shows in the Arguments panel (and click's errors quote): the usage
        line's (`argument_name`), where typer showed the parameter's lower-case name."""
        return argument_name(self)


def argument_name(argument: Any) -> str:
    """How the user sees `argument` (a click argument) named: its metavar, else its name in capitals."""
    return str(argument.metavar or (argument.name or "").upper())


def usage_piece(argument: TyperArgument) -> str:
    """How the usage line writes `argument`: its name (`argument_name`), in brackets when optional,
    followed by `...` when it takes several values (unless its metavar says so already)."""
    name = argument_name(argument)
    if not argument.required:
        name = f"[{name}]"
    if argument.nargs != 1 and not name.endswith("..."):
        name += "..."
    return name


def click_usage(command: Any) -> None:
    """Make every argument of `command` and of every command below it a `ClickUsageArgument`: the same
    argument (parsing, help panel and errors unchanged), only its usage-line piece written click's way."""
    for param in getattr(command, "params", ()):
        if type(param) is TyperArgument:
            param.__class__ = ClickUsageArgument
    for sub in getattr(command, "commands", {}).values():
        click_usage(sub)
