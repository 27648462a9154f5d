"""click's usage errors (a number outside an option's range, an unknown option, an option without its value,
an unknown command) print as Srift's one error line with a "To fix:" hint and exit 2, where typer printed its
boxed usage block; `--help` and a bare command group still print the help."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import pytest
import typer
from typer.testing import CliRunner

from srift.cli import build_app, main
from srift.commands.usage import SriftGroup


def bad_value(option: str, reason: str, command: str) -> str:
    """The line for a value click refused (out of range, not a number)."""
    return (
        f"error: {option}: {reason}. To fix: give {option} another value; run `{command} --help` for what "
        "it takes."
    )


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["catalog", "list", "--min-gpus", "-1"],
            bad_value("--min-gpus", "-1 should be greater than or equal to 0", "srift catalog list"),
        ),
        (
            ["validate", "--repeats", "0"],
            bad_value("--repeats", "0 should be greater than or equal to 1", "srift validate"),
        ),
        (
            ["jobs", "list", "--limit", "many"],
            bad_value(
                "--limit",
                "'many' should be a valid integer, unable to parse string as an integer",
                "srift jobs list",
            ),
        ),
        (
            ["catalog", "list", "--bogus"],
            "error: --bogus: `srift catalog list` has no such option (did you mean --gpu?). To fix: run "
            "`srift catalog list --help` for its options.",
        ),
        (
            ["catalog", "list", "--min-gpus"],
            "error: --min-gpus: needs a value. To fix: run `srift catalog list --help` for how to give "
            "--min-gpus.",
        ),
        (
            ["catalog", "list", "--json=yes"],
            "error: --json: does not take a value. To fix: run `srift catalog list --help` for how to give "
            "--json.",
        ),
        (
            ["traces", "import"],
            "error: PATH: this argument is required and was not given. To fix: give PATH; run `srift traces "
            "import --help` for what it takes.",
        ),
        (
            ["catalog", "lst"],
            "error: no such command 'lst' (did you mean 'list'?). To fix: run `srift catalog --help`.",
        ),
        (
            ["--bogus"],
            "error: --bogus: `srift` has no such option. To fix: run `srift --help` for its options.",
        ),
    ],
)
def test_a_usage_error_is_one_srift_line_naming_the_option_and_the_fix(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: typer's box (`╭─ Error ─╮ │ Invalid value for '--min-gpus': ... │`) under a usage block."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    assert done.value.code == 2
    assert out == ""
    assert err.splitlines() == [line]


def test_the_app_itself_reports_usage_errors_so_a_test_runner_sees_them() -> None:
    """SriftGroup prints in the root command, not only in main(): typer's runner gets the line and exit 2."""
    result = CliRunner().invoke(build_app(), ["jobs", "list", "--limit", "600"], terminal_width=80)
    assert result.exit_code == 2
    assert "╭" not in result.output
    assert result.output.splitlines() == [
        bad_value("--limit", "600 should be less than or equal to 500", "srift jobs list")
    ]


@pytest.mark.parametrize("argv", [["--help"], ["catalog", "list", "--help"], ["jobs"], []])
def test_help_and_a_bare_group_still_print_the_help(argv: list[str]) -> None:
    result = CliRunner().invoke(build_app(), argv, terminal_width=100)
    assert "Usage: srift" in result.output
    assert "error:" not in result.output
    assert result.exit_code == (0 if argv and argv[-1] == "--help" else 2)


class Colour(enum.StrEnum):
    """A choice typer reads as an enum."""

    RED = "red"
    BLUE = "blue"


def app_with_every_kind_of_value() -> typer.Typer:
    """A command under SriftGroup with an int range, a float range, a repeated int, an enum choice and a
    literal choice: every way typer refuses a value."""
    app = typer.Typer(cls=SriftGroup, add_completion=False)

    @app.command()
    def go(
        count: Annotated[int, typer.Option("--count", min=1, max=10)] = 1,
        share: Annotated[float, typer.Option("--share", min=0.1, max=0.9)] = 0.5,
        node: Annotated[list[int], typer.Option("--node", min=2)] = [2],  # noqa: B006 - typer's default
        colour: Annotated[Colour, typer.Option("--colour")] = Colour.RED,
        mode: Annotated[Literal["fast", "slow"], typer.Option("--mode")] = "fast",
    ) -> None:
        """Take the values."""

    @app.command()
    def other() -> None:
        """A second command, so `go` is named on the command line."""

    return app


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--count", "0"], "--count: 0 should be greater than or equal to 1"),
        (["--count", "11"], "--count: 11 should be less than or equal to 10"),
        (["--count", "1"], None),
        (["--count", "x1"], "--count: 'x1' should be a valid integer, unable to parse string as an integer"),
        (["--share", "0.95"], "--share: 0.95 should be less than or equal to 0.9"),
        (["--share", ""], "--share: '' should be a valid number, unable to parse string as a number"),
        (["--node", "4", "--node", "1"], "--node: 1 should be greater than or equal to 2"),
        (["--colour", "green"], "--colour: 'green' is not one of 'red', 'blue'"),
        (["--mode", "medium"], "--mode: 'medium' is not one of 'fast', 'slow'"),
    ],
)
def test_a_refused_value_is_named_in_the_line(argv: list[str], reason: str | None) -> None:
    """Was "--count: input should be greater than or equal to 1" (and "value error, 'green' is not one of
    ..."): the line did not say what the user gave."""
    result = CliRunner().invoke(app_with_every_kind_of_value(), ["go", *argv], terminal_width=80)
    if reason is None:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2
    option = reason.split(":")[0]
    assert result.output.splitlines() == [
        f"error: {reason}. To fix: give {option} another value; run `root go --help` for what it takes."
    ]
