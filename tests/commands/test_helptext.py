"""Every command's `--help` reads cleanly at 80 columns: a docstring's prose paragraphs are reflowed to the
terminal (typer's rich help kept each source line break, so every 110-column source line wrapped into a
full line and a stub), and its examples print line by line, indented as written, none wrapped."""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from srift.cli import build_app, main
from srift.commands.helptext import reflowed
from srift.commands.usage import SriftContext

COLUMNS = 80


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """`command` and every command below it, each with the words that call it."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from commands(sub, (*path, name))


ALL = list(commands(typer.main.get_command(build_app())))


def rendered_help(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code in (0, None)
    return capsys.readouterr().out


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) or "srift" for p, _ in ALL])
def test_help_at_80_columns_has_no_ragged_prose_and_no_wrapped_example(
    path: tuple[str, ...], command: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was (`srift validate --help`): "... reports predicted vs measured: MAPE overall" / "and by model, ..."
    lines ending where the source's did, and examples wrapped onto an unindented second line. Also was
    (`srift catalog import --help`): the usage line's `FILE` listed as `file` in the Arguments panel; each
    argument is now named there as in the usage line."""
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    out = rendered_help(path, capsys)
    usage = next(line.strip() for line in out.splitlines() if line.strip().startswith("Usage:"))
    if any(p.param_type_name == "argument" for p in command.params):
        panel = out.split("╭─ Arguments ", 1)[1].split("╰", 1)[0]
        for piece in usage.split("[OPTIONS]", 1)[1].split():
            name = re.escape(piece.strip("[]").replace("]...", "..."))
            assert re.search(rf"^│ [* ] +{name} ", panel, re.MULTILINE), f"{piece} not in:\n{panel}"
    lines = [line.rstrip() for line in out.splitlines()]
    assert max(len(line) for line in out.splitlines()) <= COLUMNS
    description = out.split("╭")[0].splitlines()
    for line, after in itertools.pairwise(description):
        if not line.strip() or not after.strip() or line.startswith("  ") or after.startswith("  "):
            continue
        room = COLUMNS - 1 - len(line.rstrip())  # the first word of `after` fit on `line`: a hard break
        assert len(after.split()[0]) + 1 > room, f"ragged:\n{line}\n{after}"
    source = inspect.cleandoc(command.help or "")
    for kept in (line for line in source.splitlines() if line[:1].isspace()):
        assert f" {kept}".rstrip() in lines, f"an example line wrapped or lost its indent: {kept!r}"


def test_prose_paragraphs_join_and_indented_or_marked_paragraphs_stay_verbatim() -> None:
    doc = """First line
    goes on.

    A prose paragraph
    over two lines.

    Examples:
      srift a \\
          --b 1

    \b
    kept
    as written
    """
    assert reflowed(doc) == (
        "First line goes on.\n\nA prose paragraph over two lines.\n\n"
        "Examples:\n  srift a \\\n      --b 1\n\nkept\nas written"
    )
    assert reflowed("Short.\n\f\ninternal\nnotes") == "Short.\f\ninternal\nnotes"


_USAGE_ARGUMENT = re.compile(r"\[?[A-Z][A-Z0-9_:]*(\.\.\.)?\]?(\.\.\.)?")
"""An argument in a usage line as click writes it: FILE, [FILE], FILE..., MODULE:FACTORY."""


def test_every_usage_line_writes_its_arguments_as_click_does(capsys: pytest.CaptureFixture[str]) -> None:
    """Was (`srift catalog import --help`): "Usage: srift catalog import [OPTIONS] {file}", typer's braces
    around a required argument's lower-case name, read as a template left unfilled ("{FILE...}..." for
    `srift profile upload`). Every command's usage line now writes each argument as click and the docs do:
    its metavar or name in capitals, bracketed when optional, "..." once when it takes several."""
    lines = {}
    for path, command in ALL:
        usage = command.get_usage(SriftContext(command, info_name=" ".join(("srift", *path))))
        pieces = usage.split("[OPTIONS]", 1)[1].split()
        if pieces[:2] != ["COMMAND", "[ARGS]..."]:  # a group's subcommand placeholder
            assert all(_USAGE_ARGUMENT.fullmatch(piece) for piece in pieces), usage
            assert len(pieces) == sum(p.param_type_name == "argument" for p in command.params), usage
        lines[path] = usage
    assert lines[("catalog", "import")] == "Usage: srift catalog import [OPTIONS] FILE"
    assert lines[("predict",)] == "Usage: srift predict [OPTIONS] [FILE]"
    assert lines[("profile", "upload")] == "Usage: srift profile upload [OPTIONS] FILE..."
    assert lines[("run", "reset-correction")].endswith("[OPTIONS] MODEL INSTANCE_TYPE")
    assert lines[("tokens", "revoke")].endswith("[OPTIONS] ID")
    shown = [line.strip() for line in rendered_help(("catalog", "import"), capsys).splitlines()]
    assert "Usage: srift catalog import [OPTIONS] FILE" in shown
