"""docs/BENCHMARKS.md's sections: each script replaces its own section and leaves the others alone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from srift.validation.benchmarks import HEADER, write_benchmark_section, write_section

WHEN = dt.datetime(2026, 11, 27, 4, 30, tzinfo=dt.UTC)


def test_a_new_file_gets_the_header_and_the_section_with_command_and_date(tmp_path: Path) -> None:
    path = tmp_path / "docs" / "BENCHMARKS.md"
    write_section(
        "load", "| a |\n|---|\n| 1 |", command="python -m benchmarks.load", measured_at=WHEN, path=path
    )
    text = path.read_text()
    assert text.startswith(HEADER)
    assert "<!-- section:load -->\n## load\n\nCommand: `python -m benchmarks.load`  \n" in text
    assert "Measured: 2026-11-27 04:30 UTC on " in text
    assert text.endswith("| 1 |\n<!-- /section:load -->\n")


def test_a_section_measured_on_another_machine_names_that_machine(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    write_section("GPU check", "body", command="c", measured_at=WHEN, host="NVIDIA H200 device", path=path)
    assert "Measured: 2026-11-27 04:30 UTC on NVIDIA H200 device\n" in path.read_text()


def test_rewriting_a_section_replaces_it_and_keeps_the_others_in_place(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    for name, body in (("first", "one"), ("second", "two"), ("third", "three")):
        write_section(name, body, command=name, measured_at=WHEN, path=path)
    write_section("second", "TWO", command="again", measured_at=WHEN, path=path)
    text = path.read_text()
    assert "two" not in text and text.count("<!-- section:second -->") == 1
    assert text.index("one") < text.index("TWO") < text.index("three")
    assert "Command: `again`" in text


def test_the_validation_section_is_named_after_the_run(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    write_benchmark_section({"level": "quick", "command": "srift validate --quick"}, "body", path=path)
    text = path.read_text()
    assert "## end-to-end accuracy (quick matrix, testbed)" in text
    assert "Command: `srift validate --quick`" in text
