"""Every command's `--help` reads cleanly at 80 columns: a docstring's prose paragraphs are reflowed to the
terminal (typer's rich help kept each source line break, so every 110-column source line wrapped into a
full line and a stub), and its examples print line by line, indented as written, none wrapped."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from srift.cli import build_app, main
from srift.commands.helptext import reflowed

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
    lines ending where the source's did, and examples wrapped onto an unindented second line."""
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    out = rendered_help(path, capsys)
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
