"""`srift probe import --format nccl-tests`: the p5 reference file, idempotence, and line-numbered errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.bandwidth.nccl_tests import NcclTestsHost, parse_nccl_tests
from srift.bandwidth.samples import count_samples
from srift.db.session import session_factory
from srift.db.tables import ProbeSample
from srift.errors import InvalidInput

from .helpers import run_cli

IMPORT = ("probe", "import", "--format", "nccl-tests", "--instance-type", "p5.48xlarge", "--nodes", "2")
HOST = NcclTestsHost(provider="aws", instance_type="p5.48xlarge", nodes=2, gpus_per_node=8)


def _rows(url: str) -> list[ProbeSample]:
    with session_factory(url)() as session:
        return list(session.scalars(select(ProbeSample).order_by(ProbeSample.buffer_bytes)))


def test_reference_p5_file_imports_one_row_per_size_once(
    cli_db: str, reference_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, *IMPORT, "--gpus-per-node", "8", str(reference_path), "--json")
    assert code == 0, err
    assert json.loads(out) == {"parsed": 32, "stored": 32, "sizes": 32, "instance_types": ["aws/p5.48xlarge"]}
    rows = _rows(cli_db)
    assert len(rows) == 32 and len({r.buffer_bytes for r in rows}) == 32
    largest = rows[-1]
    assert largest.buffer_bytes == 17179869184 and largest.world_size == 16
    assert largest.busbw_gbps / 8 == pytest.approx(487.09, abs=0.005)
    assert largest.busbw_gbps == pytest.approx(487.09 * 8, rel=1e-4)
    assert largest.time_s == pytest.approx(66132e-6)
    assert rows[0].busbw_gbps > 0  # printed as 0.00 GB/s; derived from the time
    assert largest.features["gpu_name"] == "H100" and largest.features["rated_gbps"] == 3200

    code, out, _ = run_cli(capsys, *IMPORT, str(reference_path), "--json")  # gpus per node from the catalog
    assert code == 0 and json.loads(out)["stored"] == 0
    assert len(_rows(cli_db)) == 32


def test_malformed_row_fails_with_its_line_number_and_stores_nothing(
    cli_db: str, reference_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = reference_path.read_text().splitlines()
    lines[9] = lines[9].replace("69.24", "6x.24")
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, *IMPORT, "--gpus-per-node", "8", str(bad))
    assert code == 2
    line = " ".join(err.split())
    assert line.startswith("error: bad.txt:10: cannot read size") and "To fix" in line, err
    assert "line 10" not in line and line.count(":10:") == 1, (
        err
    )  # the row is named once, not "line 10: …:10:"
    assert _rows(cli_db) == []


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda ls: [*ls[:5], ls[5][:40], *ls[6:]], "bad.txt:6: expected at least"),
        (lambda ls: ls[2:], "bad.txt:1: a data row before the column header"),
        (lambda ls: ["# nothing here", "no table either"], "no all_reduce_perf rows"),
    ],
)
def test_other_malformed_text(tmp_path: Path, reference_path: Path, mutate: object, words: str) -> None:
    lines = reference_path.read_text().splitlines()
    with pytest.raises(InvalidInput) as caught:
        parse_nccl_tests("\n".join(mutate(lines)), host=HOST, source="bad.txt")  # type: ignore[operator]
    assert words in caught.value.detail


def test_wrong_rank_count_is_caught_by_the_busbw_check(reference_path: Path) -> None:
    host = NcclTestsHost(provider="aws", instance_type="p5.48xlarge", nodes=1, gpus_per_node=8)
    with pytest.raises(InvalidInput) as caught:
        parse_nccl_tests(reference_path.read_text(), host=host, source="ref.txt")
    assert "across 8 ranks" in caught.value.detail and "--nodes" in caught.value.hint


def test_rank_prefixes_and_the_older_column_layout_are_read() -> None:
    text = "\n".join(
        [
            "# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20",
            "#  Rank  0 Group  0 Pid   1 on host-a device  0 [0x10] Tesla V100-SXM2-16GB",
            "#  Rank  1 Group  0 Pid   2 on host-b device  0 [0x10] Tesla V100-SXM2-16GB",
            "ip-10-0-0-1:1:1 [0] NCCL INFO Launch mode Parallel",
            "#   size    count   type  redop   time  algbw  busbw  error   time  algbw  busbw",
            "[1,0]<stdout>:   1024   256  float  sum  50.00  0.02  0.02  0e+00  51.0",
            "   2048    512  float    sum  51.20   0.04   0.04  0e+00   52.0   0.04   0.04",
            "# Avg bus bandwidth    : 0.03",
        ]
    )
    host = NcclTestsHost(provider="aws", instance_type="p3.2xlarge", nodes=2, gpus_per_node=1)
    records = parse_nccl_tests(text, host=host)
    assert [(r.buffer_bytes, round(r.time_s * 1e6, 6)) for r in records] == [(1024, 50.0), (2048, 51.2)]
    assert all(r.backend == "nccl-tests" and r.world_size == 2 for r in records)


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (
            ["--instance-type", "p9.mega", "--nodes", "2", "--gpus-per-node", "8"],
            2,
            "no instance type 'p9.mega'",
        ),
        (["--instance-type", "p5.48xlarge", "--nodes", "1", "--gpus-per-node", "1"], 2, "world size 1 < 2"),
        (["--instance-type", "p5.48xlarge", "--nodes", "0", "--gpus-per-node", "8"], 2, "nodes must be ≥ 1"),
        (["--nodes", "2", "--gpus-per-node", "8"], 2, "does not say which instance type"),
    ],
)
def test_bad_import_arguments_store_nothing(
    cli_db: str,
    reference_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    code: int,
    words: str,
) -> None:
    got, _, err = run_cli(capsys, "probe", "import", str(reference_path), "--format", "nccl-tests", *args)
    assert got == code and words in err
    with session_factory(cli_db)() as session:
        assert count_samples(session=session) == 0


def test_unknown_format_is_an_input_error(
    cli_db: str, reference_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "probe", "import", str(reference_path), "--format", "csv")
    assert code == 2 and "unknown format 'csv'" in err


def test_parser_never_touches_the_session(session: Session, reference_path: Path) -> None:
    records = parse_nccl_tests(reference_path.read_text(), host=HOST)
    assert len(records) == 32 and count_samples(session=session) == 0


def test_nccl_tests_output_imported_as_json_lines_is_told_the_format(
    cli_db: str, reference_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default --format is jsonl: nccl-tests output given without --format (with or without rank prefixes)
    is told to add --format nccl-tests, not the JSON error of its first line; a file of neither format keeps
    that JSON error."""
    plain = tmp_path / "plain.txt"
    plain.write_text(
        "".join(line.split(": ", 1)[1] + "\n" for line in reference_path.read_text().splitlines())
    )
    for path in (reference_path, plain):
        code, _, err = run_cli(capsys, "probe", "import", str(path), "--instance-type", "p5.48xlarge")
        flat = " ".join(err.split())
        assert code == 2 and f"error: format: {path.name} is nccl-tests output, not probe JSON lines" in flat
        assert "To fix: import it with --format nccl-tests" in flat
    other = tmp_path / "notes.txt"
    other.write_text("# size time busbw\nhello\n")
    code, _, err = run_cli(capsys, "probe", "import", str(other))
    assert code == 2 and "not valid JSON" in err
    assert _rows(cli_db) == []
