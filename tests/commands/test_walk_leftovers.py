"""What a newcomer's walk through the CLI left: each error names the option typed, says why in one line
with "To fix: ...", exits 2 and writes nothing; the docs state what the commands read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from srift.cli import build_app, main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def one_line(err: str) -> str:
    """The single error line, with the console's wrapping undone."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_a_log_with_epoch_seconds_is_refused_naming_the_time_once_and_the_format_is_documented(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`srift traces import log.csv` with epoch-second times said "rows[0].time: log.csv: rows[0].time
    (line 2) '1700000000' is not an ISO 8601 time", and neither docs/spot.md nor --help said what a
    time is."""
    log = tmp_path / "log.csv"
    log.write_text("time,zone,instance_type,event,count\n1700000000,us-east-1a,p3.2xlarge,launched,1\n")
    code, out, err = run(capsys, "traces", "import", str(log))
    line = one_line(err)
    assert code == 2 and out == "" and line.count("rows[0].time") == 1, err
    assert line.startswith("error: rows[0].time: log.csv: (line 2) '1700000000' is not an ISO 8601 time"), err
    assert "epoch seconds" in line and "To fix: " in line, err
    assert not (tmp_path / "spot-traces.json").exists()
    helped = CliRunner().invoke(build_app(), ["traces", "import", "--help"], terminal_width=200).output
    assert "ISO 8601" in helped and "2024-05-01T10:00:00Z" in helped
    spot = (ROOT / "docs" / "spot.md").read_text()
    assert "`time` is an ISO 8601 date and time" in spot and "epoch" in spot


@pytest.mark.parametrize(
    "given",
    [
        ("--mode", "eager"),
        ("--solve-budget", "5"),
        ("--confidence", "0.5"),
        ("--recent-trace", "user:log.csv#aws/us-east-1a/p3.2xlarge"),
        ("--recent-log", "log.csv"),
        ("--as-of-s", "60"),
        ("--replay-traces", "traces/"),
        ("--bucket-cap-mb", "50"),
        ("--per-layer",),
    ],
)
def test_planning_options_beside_plan_id_are_refused_not_ignored(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], given: tuple[str, ...]
) -> None:
    """`srift plan --plan-id N --emit torchrun --mode eager` emitted plan N's files as they were planned and
    said nothing of --mode (nor of --solve-budget, --confidence, --recent-*, --as-of-s, --replay-traces,
    --bucket-cap-mb, --per-layer): the user believed the files reflected them."""
    code, out, err = run(capsys, "plan", "--plan-id", "1", "--emit", "torchrun", *given)
    line = one_line(err)
    assert code == 2 and out == "", err
    assert line.startswith(f"error: {given[0]}: {given[0]} shapes the search"), err
    assert "--plan-id 1 emits the stored plan" in line and f"To fix: drop {given[0]}" in line, err
    code, out, err = run(capsys, "plan", "--plan-id", "1", "--emit", "torchrun", "--mode", "eager", *given)
    assert code == 2 and "--mode" in one_line(err) and given[0] in one_line(err), err


def test_a_quick_probe_of_a_cloud_type_on_the_default_provider_says_local_cannot_run_it(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`srift probe run --quick --instance-type g4dn.12xlarge` (provider left at its default, local) asked
    for EC2 options (`image_id: an EC2 quick probe needs --image-id ...`) without saying why EC2: the real
    cause is that provider local probes this machine and cannot run a cloud type."""
    code, out, err = run(capsys, "probe", "run", "--quick", "--instance-type", "g4dn.12xlarge")
    line = one_line(err)
    assert code == 2 and out == "", err
    assert line.startswith("error: --provider: the default provider, local, probes this machine"), err
    assert "cannot run g4dn.12xlarge" in line and "To fix: pass --provider ec2 --image-id " in line, err
    code, out, err = run(capsys, "jobs", "list", "--json")
    assert code == 0 and json.loads(out) == [], err


@pytest.mark.parametrize(
    ("flags", "start"),
    [
        (
            ("--nodes", "2", "--min-bytes", "1M", "--max-bytes", "4K"),
            "error: --min-bytes: the grid's smallest",
        ),
        (("--nodes", "1"), "error: --nodes: an allreduce needs at least 2 processes, not 1"),
        (("--sizes", "4,6"), "error: --sizes: size 6 B is not a positive multiple of 4 bytes"),
        (("--max-bytes", "zero"), "error: --max-bytes: 'zero' is not a positive size"),
    ],
)
def test_a_local_probe_that_cannot_run_is_refused_naming_its_option_before_any_progress(
    local: None, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], start: str
) -> None:
    """`srift probe run --nodes 2 --min-bytes 1M --max-bytes 4K` blamed `sizes`, and it and `--nodes 1`
    drew the progress bar ("probing ... starting ranks") before the error."""
    code, out, err = run(capsys, "probe", "run", *flags)
    assert code == 2 and out == "", err
    line = one_line(err)
    assert line.startswith(start) and "To fix: " in line and "probing" not in err, err


@pytest.mark.parametrize("kind", ["probe", "profile"])
def test_an_ec2_job_without_its_options_names_the_flags_and_the_file_that_carry_them(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """`srift jobs submit probe --provider ec2 ...` hinted "add them" (image_id, results_url), and no flag
    carried them. The hint names --image-id and --results-url, and the file for the other ec2 options; a
    file with them is then queued, on a fresh data directory too (submit found no catalog there: "the
    catalog has no aws types")."""
    flags = (
        ("--instance-type", "p3.2xlarge", "--nodes", "2")
        if kind == "probe"
        else ("--instance-types", "p3.2xlarge", "--model", "m:f", "--input", "m:i")
    )
    code, out, err = run(capsys, "jobs", "submit", kind, "--provider", "ec2", *flags)
    line = one_line(err)
    assert code == 2 and out == "", err
    assert line.startswith("error: ec2: provider ec2 needs `ec2` options") and "add them" not in line, err
    assert "To fix: give --image-id (an AMI" in line and "and --results-url (this server" in line, err
    assert "go in a request file's `ec2:` mapping, passed with --file" in line, err
    request = tmp_path / "r.yaml"
    request.write_text("ec2:\n  image_id: ami-0123456789abcdef0\n  results_url: http://10.0.0.5:8000\n")
    code, out, err = run(capsys, "jobs", "submit", kind, "--provider", "ec2", *flags, "--file", str(request))
    assert code == 0, err
    code, out, err = run(capsys, "jobs", "list", "--json")
    assert [j["provider"] for j in json.loads(out)] == ["ec2"]


def test_a_probe_job_without_nodes_names_the_option(local: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "jobs", "submit", "probe", "--provider", "local", "--instance-type", "local")
    assert code == 2 and one_line(err).startswith("error: --nodes: ") and "e.g. --nodes 2,4" in err, err


@pytest.mark.parametrize(
    ("flag", "refusals"),
    [
        (
            "--solve-budget",
            [
                ("nan", "error: --solve-budget: nan is not a number."),
                ("inf", "error: --solve-budget: inf is not a finite number."),
            ],
        ),
        (
            "--confidence",
            [
                ("nan", "error: --confidence: nan is not a number."),
                ("2", "error: --confidence: 2 is outside 0.5..0.99."),
            ],
        ),
    ],
)
def test_a_planning_number_that_is_not_one_is_refused_as_such(
    local: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    refusals: list[tuple[str, str]],
) -> None:
    """`srift plan r.yaml --solve-budget nan` said "solve_budget_s: Input should be greater than 0" and
    `--confidence nan` "should be less than or equal to 0.99": nan is neither, it is not a number. Each
    flag's refusals share one request and one accepted plan (each plan prepares a new data folder)."""
    code, out, err = run(capsys, "plan", "--example")
    request = tmp_path / "r.yaml"
    request.write_text(out)
    for value, start in refusals:
        code, out, err = run(capsys, "plan", str(request), flag, value)
        assert code == 2 and out == "", err
        line = one_line(err)
        assert line.startswith(start) and f"To fix: give {flag} " in line, err
    code, out, err = run(capsys, "plan", str(request), flag, "0.9", "--json")
    assert code == 0, err


@pytest.mark.parametrize(
    ("value", "words"),
    [("inf", "inf is not a finite number."), ("nan", "nan is not a number."), ("-1", "-1.0 is negative.")],
)
def test_an_infinite_optimizer_step_is_not_finite_not_negative(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, words: str
) -> None:
    """`srift profile import t4.csv ... --update-s inf` said "update_s: inf is negative" (and nan failed
    typer's range check as "should be greater than or equal to 0")."""
    from srift.optimize.synthetic import synthetic_profile

    layers = tmp_path / "resnet50.json"
    layers.write_text(json.dumps(synthetic_profile("resnet50", "T4").to_dict()))
    table = tmp_path / "t4.csv"
    table.write_text("batch,step_s\n8,0.21\n16,0.39\n32,0.76\n")
    out_file = tmp_path / "resnet50-t4.json"
    argv = ["profile", "import", str(table), "--layers", str(layers), "--accelerator", "T4"]
    code, out, err = run(capsys, *argv, "--out", str(out_file), "--update-s", value)
    assert code == 2 and out == "", err
    line = one_line(err)
    assert line.startswith(f"error: --update-s: {words}"), err
    assert "To fix: give " in line and not out_file.exists()
    code, out, err = run(capsys, *argv, "--out", str(out_file), "--update-s", "0.01")
    assert code == 0 and out_file.exists(), err


def test_the_importer_calls_an_infinite_optimizer_step_not_finite() -> None:
    """The API's import (POST of a table) checks update_s the same way: inf is not "negative"."""
    from srift.errors import InvalidInput
    from srift.optimize.synthetic import synthetic_profile
    from srift.profiling.imports import build_profile, parse_compute_table

    with pytest.raises(InvalidInput) as caught:
        build_profile(
            table=parse_compute_table("batch,step_s\n8,0.21\n16,0.39\n", source="t4.csv"),
            layers=synthetic_profile("resnet50", "T4"),
            accelerator="T4",
            model_name=None,
            max_batch=None,
            forward_fraction=None,
            straggler_cv=None,
            update_s=float("inf"),
            table_source="t4.csv",
            table_sha256="0" * 64,
            created_at="2026-12-07T00:00:00+00:00",
            precision=None,
        )
    assert caught.value.field == "update_s" and caught.value.detail == "inf is not a finite number of seconds"


def test_db_current_on_an_empty_database_says_so_and_how_to_migrate(
    local: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`srift db current` on an empty database printed `current: None  head: 0005`."""
    code, out, err = run(capsys, "db", "current")
    assert code == 0, err
    assert out.startswith("current: none (empty database)  head: ") and "None" not in out
    assert "run `srift db upgrade`" in out
    code, out, err = run(capsys, "db", "upgrade")
    code, out, err = run(capsys, "db", "current")
    assert code == 0 and "upgrade" not in out and out.startswith("current: "), out
    code, out, err = run(capsys, "db", "downgrade", "base")
    assert code == 0 and "None" not in out and "no revision" in out, out


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (("amend", "1", "--budget", "nan"), "error: --budget: nan is not a number."),
        (("amend", "1", "--time-limit", "nan"), "error: --time-limit: nan is not a number."),
        (("amend", "1", "--launch-overhead", "inf"), "error: --launch-overhead: inf is not a finite number."),
        (("amend", "1", "--budget", "-1"), "error: --budget: -1 is below 0."),
        (
            ("progress", "1", "--iterations", "0", "--elapsed", "nan", "--spent", "0"),
            "error: --elapsed: nan ",
        ),
        (("progress", "1", "--iterations", "0", "--elapsed", "0", "--spent", "nan"), "error: --spent: nan "),
        (("interrupt", "1", "--type", "tb.small", "--spent", "nan"), "error: --spent: nan is not a number."),
    ],
)
def test_a_run_number_that_is_not_one_is_refused_as_such(
    local: None, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], start: str
) -> None:
    """`srift run amend 1 --budget nan` said "Input should be greater than or equal to 0" (typer's range
    check): nan is not a number at all, and the run is never asked."""
    code, out, err = run(capsys, "run", *argv)
    assert code == 2 and out == "", err
    line = one_line(err)
    assert line.startswith(start) and "To fix: give --" in line, err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("model: resnet50\n", "not valid JSON (Expecting value at column 1)"),
        ("\n{not json\n", "not valid JSON (Expecting property name"),  # a blank line is skipped
    ],
)
def test_a_bad_json_lines_file_names_its_file_and_line_once(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    """`srift probe import r.yaml` (a YAML file, not JSON lines) said "line 1: r.yaml:1: not valid JSON":
    the location twice, once without the file."""
    bad = tmp_path / "r.yaml"
    bad.write_text(text)
    lines = text.count("\n")
    code, out, err = run(capsys, "probe", "import", str(bad))
    line = one_line(err)
    assert code == 2 and out == "", err
    assert line.startswith(f"error: r.yaml:{lines}: {words}") and f"line {lines}" not in line, err
    assert "To fix: write one JSON object per line" in line, err


@pytest.mark.parametrize(
    ("command", "key", "flag", "bad"),
    [
        ("predict", "transport", "--transport", "udp"),
        ("predict", "library", "--library", "mpi"),
        ("plan", "mode", "--mode", "fast"),
    ],
)
def test_a_bad_override_flag_is_named_as_typed_and_a_bad_file_field_as_written(
    local: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    key: str,
    flag: str,
    bad: str,
) -> None:
    """`srift predict r.yaml --transport udp` said "error: network.transport: ...", the request's field,
    where the user typed --transport (`srift plan r.yaml --mode fast` said "mode"). The same value written
    in the file is still named by the file's field."""
    code, example, _ = run(capsys, command, "--example")
    request = tmp_path / "r.yaml"
    request.write_text(example)
    code, out, err = run(capsys, command, str(request), flag, bad)
    assert code == 2 and out == "" and one_line(err).startswith(f"error: {flag}: "), err
    field = f"network.{key}" if command == "predict" else key
    written = tmp_path / "bad.yaml"
    text = example.replace(f"\n{key}: ", f"\n{key}: {bad} #").replace(f"\n  {key}: ", f"\n  {key}: {bad} #")
    assert text != example
    written.write_text(text)
    code, out, err = run(capsys, command, str(written))
    assert code == 2 and out == "" and one_line(err).startswith(f"error: {field}: "), err


def test_a_job_without_its_instance_type_names_the_flag_or_the_files_field(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`srift jobs submit probe --provider local --nodes 2` said "error: --instance-type: instance_type is
    missing": the flag at fault, then the request's field. Given flags only, it says the option was not
    given, as click does for a required option; with --file, the file may carry it, so its field is named."""
    code, out, err = run(capsys, "jobs", "submit", "probe", "--provider", "local", "--nodes", "2")
    line = one_line(err)
    assert code == 2 and out == "" and "instance_type" not in line, err
    assert line.startswith("error: --instance-type: this option is required and was not given. To fix: "), err
    request = tmp_path / "job.yaml"
    request.write_text("node_counts: [2]\n")
    code, out, err = run(capsys, "jobs", "submit", "probe", "--provider", "local", "--file", str(request))
    assert code == 2 and one_line(err).startswith("error: --instance-type: instance_type is missing."), err
    code, out, _ = run(capsys, "jobs", "list", "--json")
    assert json.loads(out) == []
