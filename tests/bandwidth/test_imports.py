"""`srift probe import` against the catalog: an unknown instance type or provider is blamed on the
import's own field (`instance_type`, `provider`) and, for JSON lines, on the first line naming it;
nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srift.bandwidth.records import ProbeRecord, records_to_jsonl
from srift.bandwidth.samples import count_samples
from srift.db.session import session_factory

from .helpers import run_cli


def _lines(records: list[ProbeRecord], **fields: str) -> list[str]:
    """The records as JSON lines with `fields` replaced (e.g. a provider and type of the AWS catalog)."""
    return [json.dumps({**json.loads(line), **fields}) for line in records_to_jsonl(records).splitlines()]


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        (
            {"provider": "aws", "instance_type": "p3.16xlargee"},
            "instance_type",
            "probe.jsonl:4: provider 'aws' has no instance type 'p3.16xlargee'",
        ),
        (
            {"provider": "ibm", "instance_type": "bx2.8x32"},
            "provider",
            "probe.jsonl:4: unknown provider 'ibm'",
        ),
    ],
)
def test_an_unknown_type_or_provider_names_its_field_and_first_line(
    cli_db: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    testbed_records: list[ProbeRecord],
    fields: dict[str, str],
    field: str,
    words: str,
) -> None:
    known = _lines(testbed_records[:2], provider="aws", instance_type="p3.16xlarge", region="us-east-1")
    unknown = _lines(testbed_records[2:4], **fields)
    path = tmp_path / "probe.jsonl"
    path.write_text("\n".join([*known, "", *unknown]) + "\n")  # line 3 is blank: line 4 is the first bad one
    code, _, err = run_cli(capsys, "probe", "import", str(path))
    flat = " ".join(err.split())
    assert code == 2 and f"error: {field}: {words}" in flat, err
    with session_factory(cli_db)() as session:
        assert count_samples(session=session) == 0


def test_an_unknown_type_given_by_option_names_instance_type(
    cli_db: str, reference_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "--format",
        "nccl-tests",
        "--instance-type",
        "p5.48xlargee",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
    ]
    code, _, err = run_cli(capsys, "probe", "import", str(reference_path), *args)
    flat = " ".join(err.split())
    assert code == 2 and "error: instance_type: provider 'aws' has no instance type 'p5.48xlargee'" in flat


def test_a_ring_imported_in_either_order_is_one_ring_and_a_type_named_twice_is_refused(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], testbed_records: list[ProbeRecord]
) -> None:
    """`--instance-type b+a` and `--instance-type a+b` stored the same file twice, as two rings; both now
    store under the ring's one spelling (its types sorted), so the second import adds nothing and a query
    of the ring's types finds its samples under that name. A ring naming a type twice is refused on
    `instance_type` before anything is stored."""
    from srift.bandwidth.records import SampleQuery
    from srift.bandwidth.samples import load_samples

    path = tmp_path / "ring.jsonl"
    path.write_text("\n".join(_lines(testbed_records[:3], provider="local")) + "\n")
    stored = []
    for ring in ("tb.small+tb.large", "tb.large+tb.small"):
        code, out, err = run_cli(capsys, "probe", "import", str(path), "--instance-type", ring, "--json")
        assert code == 0, err
        stored.append(json.loads(out))
    assert [s["stored"] for s in stored] == [3, 0]
    assert stored[0]["instance_types"] == stored[1]["instance_types"] == ["local/tb.large+tb.small"]
    with session_factory(cli_db)() as session:
        found = load_samples(session=session, query=SampleQuery(instance_types=("tb.small", "tb.large")))
        assert {r.instance_type for r in found} == {"tb.large+tb.small"} and len(found) == 3
    code, _, err = run_cli(capsys, "probe", "import", str(path), "--instance-type", "tb.small+tb.small")
    flat = " ".join(err.split())
    assert code == 2 and "error: instance_type: the mixed ring 'tb.small+tb.small' names 'tb.small'" in flat
    assert "To fix: give each type once (tb.small)" in flat, err
    with session_factory(cli_db)() as session:
        assert count_samples(session=session) == 3


def _nccl_ring(
    capsys: pytest.CaptureFixture[str], path: Path, ring: str, *options: str
) -> tuple[int, str, str]:
    args = ["--format", "nccl-tests", "--instance-type", ring, "--nodes", "2", *options, "--json"]
    return run_cli(capsys, "probe", "import", str(path), *args)


def test_nccl_tests_output_of_a_mixed_ring_is_checked_type_by_type_and_stored_under_its_one_name(
    cli_db: str, reference_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--format nccl-tests --instance-type a+b` looked the ring's name up as one catalog type and was a
    NotFound; each of its types is looked up instead (as for JSON lines), the samples are stored under the
    ring's sorted name, GPUs per instance default to the count its types share, and the rated bandwidth is
    its slowest type's (what a probe job of the ring records)."""
    from srift.bandwidth.records import SampleQuery
    from srift.bandwidth.samples import load_samples

    code, out, err = _nccl_ring(capsys, reference_path, "p5.48xlarge+p4d.24xlarge")
    assert code == 0, err
    result = json.loads(out)
    assert (
        result["instance_types"] == ["aws/p4d.24xlarge+p5.48xlarge"] and result["stored"] == result["parsed"]
    )
    code, out, err = _nccl_ring(capsys, reference_path, "p4d.24xlarge+p5.48xlarge")
    assert code == 0 and json.loads(out)["stored"] == 0, "the other order is the same ring: nothing new"
    with session_factory(cli_db)() as session:
        found = load_samples(
            session=session, query=SampleQuery(instance_types=("p4d.24xlarge", "p5.48xlarge"))
        )
    assert len(found) == result["parsed"] > 20
    assert {(r.instance_type, r.ranks_per_node, r.world_size) for r in found} == {
        ("p4d.24xlarge+p5.48xlarge", 8, 16)
    }
    assert {(r.gpu_name, r.rated_gbps) for r in found} == {("", 400.0)}, "A100 and H100 share no GPU model"


@pytest.mark.parametrize(
    ("ring", "options", "words"),
    [
        (
            "p5.48xlarge+p4d.24xlargee",
            [],
            "error: instance_type: provider 'aws' has no instance type 'p4d.24xlargee'",
        ),
        (
            "p5.48xlarge+g4dn.12xlarge",
            [],
            "error: gpus_per_node: the mixed ring's types have different GPU counts (g4dn.12xlarge: 4, "
            "p5.48xlarge: 8)",
        ),
        ("p5.48xlarge+p5.48xlarge", ["--gpus-per-node", "8"], "error: instance_type: the mixed ring"),
    ],
)
def test_a_mixed_ring_of_nccl_tests_output_with_an_unknown_type_or_unknown_gpus_stores_nothing(
    cli_db: str,
    reference_path: Path,
    capsys: pytest.CaptureFixture[str],
    ring: str,
    options: list[str],
    words: str,
) -> None:
    code, _, err = _nccl_ring(capsys, reference_path, ring, *options)
    flat = " ".join(err.split())
    assert code == 2 and words in flat and "To fix:" in flat, err
    assert "Traceback" not in err
    with session_factory(cli_db)() as session:
        assert count_samples(session=session) == 0
