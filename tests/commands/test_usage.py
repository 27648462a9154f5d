"""click's usage errors (a number outside an option's range, an unknown option, an option without its value,
an unknown command) print as Srift's one error line with a "To fix:" hint and exit 2, where typer printed its
boxed usage block; `--help` and a bare command group still print the help."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from srift.cli import build_app, main


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
            bad_value("--min-gpus", "input should be greater than or equal to 0", "srift catalog list"),
        ),
        (
            ["validate", "--repeats", "0"],
            bad_value("--repeats", "input should be greater than or equal to 1", "srift validate"),
        ),
        (
            ["jobs", "list", "--limit", "many"],
            bad_value(
                "--limit",
                "input should be a valid integer, unable to parse string as an integer",
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
        bad_value("--limit", "input should be less than or equal to 500", "srift jobs list")
    ]


@pytest.mark.parametrize("argv", [["--help"], ["catalog", "list", "--help"], ["jobs"], []])
def test_help_and_a_bare_group_still_print_the_help(argv: list[str]) -> None:
    result = CliRunner().invoke(build_app(), argv, terminal_width=100)
    assert "Usage: srift" in result.output
    assert "error:" not in result.output
    assert result.exit_code == (0 if argv and argv[-1] == "--help" else 2)
