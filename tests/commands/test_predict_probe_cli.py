"""`srift predict` sweeps with an inlined profile and network flags, and `srift probe run --quick`, through
the real entry point on the shipped AWS catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim.kit import profile as toy_profile
from sqlalchemy import select

from srift.api.schemas.predictions import FleetChoiceIn
from srift.cli import main
from srift.db.session import transaction
from srift.db.tables import Job
from srift.domain.profile_document import ProfileIn

PROFILE = toy_profile(fw_s=0.1, bw_s=0.2, layers=((400_000_000, 0.3), (600_000_000, 0.9)), cv=0.03)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def _files(tmp_path: Path) -> tuple[Path, Path]:
    profile = tmp_path / "v100.json"
    profile.write_text(json.dumps(PROFILE.to_dict()))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "provider: aws\nregion: us-east-1\niterations: 100\nconfigs:\n"
        "  - choices: [{instance_type: p3.2xlarge, count: 2, batch: 32}]\n"
        "  - choices: [{instance_type: p3.8xlarge, count: 2, batch: 128, gpus: 2}]\n"
    )
    return profile, sweep


def test_a_sweep_with_an_inlined_profile_and_network_flags(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile, sweep = _files(tmp_path)
    code, out, err = run(capsys, "predict", str(sweep), "--profile", str(profile), "--verbose")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "2 fleets" in flat and "2×p3.8xlarge[2gpu]@128" in flat
    assert "network: tcp/nccl" in flat and "srift probe run --quick --instance-type p3.2xlarge" in flat
    # NCCL on AWS, ENA visibility not given: the one-socket fallback, with the band's fast end shown
    assert "1 flow(s) × 5 Gbit/s" in flat and "fallback" in flat and "band's fast end" in flat
    code, out, err = run(capsys, "predict", str(sweep), "--profile", str(profile), "--ena-visible", "--json")
    assert code == 0, err
    seen = json.loads(out)["network"]
    assert seen["flows_per_peer"]["p3.2xlarge"] == 16 and "ENA visible to NCCL" in seen["label"]
    code, out, err = run(
        capsys,
        "predict",
        str(sweep),
        "--profile",
        str(profile),
        "--library",
        "gloo",
        "--placement-group",
        "--measured-gbps",
        "p3.8xlarge=2.5",
        "--json",
    )
    assert code == 0, err
    answer = json.loads(out)
    net = answer["network"]
    assert net["library"] == "gloo" and net["placement_group"] is True
    rates = {r["instance_type"]: r for r in net["rates"]}
    assert rates["p3.8xlarge"]["gbps"] == 2.5 and rates["p3.8xlarge"]["source"] == "measured"
    # gloo's one flow may carry 10 Gbit/s in a placement group, so the 10 Gbit/s NIC bounds p3.2xlarge
    assert rates["p3.2xlarge"]["limit"] == "TCP: 0.81 × rated 10 Gbit/s"
    assert net["flows_per_peer"]["p3.2xlarge"] == 1
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(profile), "--measured-gbps", "p3=x")
    assert code == 2 and "TYPE=GBPS" in err


def test_a_missing_profile_file_is_named_as_such_and_a_missing_request_file_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--profile inlines profile documents into the request FILE: a --profile path that does not exist is
    that error (not "no request file given"), and a FILE left out beside a good --profile says FILE is
    still needed and why."""
    profile, sweep = _files(tmp_path)
    missing = tmp_path / "nonexistent.json"
    code, _, err = run(capsys, "predict", "--profile", str(missing))
    flat = " ".join(err.split())
    assert code == 2 and f"--profile: cannot read {missing}: the file does not exist" in flat, err
    assert "To fix: check the path; the request FILE is needed too" in flat
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(missing))
    flat = " ".join(err.split())
    assert code == 2 and "--profile: cannot read" in flat and "FILE is needed" not in flat, err
    code, _, err = run(capsys, "predict", "--profile", str(profile))
    flat = " ".join(err.split())
    assert code == 2 and "FILE: no request file given: --profile only inlines the model's profiles" in flat
    assert f"edit it, then `srift predict r.yaml --profile {profile}`" in flat
    code, _, err = run(capsys, "predict", str(tmp_path / "none.yaml"), "--profile", str(profile))
    assert code == 2 and "FILE: cannot read" in " ".join(err.split()) and "does not exist" in err, err


def test_a_profile_whose_created_at_is_no_date_time_is_refused_naming_it(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile, sweep = _files(tmp_path)
    profile.write_text(json.dumps({**PROFILE.to_dict(), "created_at": "yesterday"}))
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(profile))
    flat = " ".join(err.split())
    assert code == 2, err
    assert "profiles[0].created_at: created_at 'yesterday' is not an ISO 8601 date-time" in flat
    assert "To fix: write it like 2026-12-06T14:08:45+00:00" in flat


def test_a_nested_field_is_told_its_own_models_hint(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad field inside an inlined profile (`profiles[0].max_batch`) or inside a sweep's fleet
    (`configs[1].choices[0].batch`) was told "correct the named field": hints were looked up by the
    request's top-level field only. Each now gets its own model's hint, as POST /v1/predictions answers
    (tests/api/test_error_shapes.py)."""
    profile, sweep = _files(tmp_path)
    profile.write_text(json.dumps({**PROFILE.to_dict(), "max_batch": 0}))
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(profile))
    flat = " ".join(err.split())
    assert code == 2 and "profiles[0].max_batch" in flat, err
    assert f"To fix: {ProfileIn.FIELD_HINTS['max_batch']}" in flat, err
    profile, sweep = _files(tmp_path)
    sweep.write_text(sweep.read_text().replace("batch: 128", "batch: 0"))
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(profile))
    flat = " ".join(err.split())
    assert code == 2 and "configs[1].choices[0].batch" in flat, err
    assert f"To fix: {FleetChoiceIn.FIELD_HINTS['batch']}" in flat, err


def test_a_bad_enum_is_told_the_values_it_takes_from_a_flag_and_from_the_file(
    cli_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--transport udp` (or `transport: udp` in FILE) was told "To fix: correct the named field."; the
    hint now lists the values the field takes, as POST /v1/predictions answers (tests/api/
    test_schema_hints.py)."""
    profile, sweep = _files(tmp_path)
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(profile), "--transport", "udp")
    flat = " ".join(err.split())
    assert code == 2 and "--transport: Input should be 'tcp' or 'efa'" in flat, err
    assert "To fix: use one of: tcp, efa." in flat and "correct the named field" not in flat, err
    sweep.write_text(sweep.read_text() + "network: {transport: udp}\n")
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(profile))
    flat = " ".join(err.split())
    assert code == 2 and "network.transport:" in flat and "To fix: use one of: tcp, efa." in flat, err
    sweep.write_text(sweep.read_text().replace("iterations: 100", "iteratons: 100"))
    code, _, err = run(capsys, "predict", str(sweep), "--profile", str(profile))
    flat = " ".join(err.split())
    assert code == 2 and "To fix: add iterations." in flat, err


def test_quick_probe_queues_a_capped_two_node_job(cli_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    ec2 = ["--image-id", "ami-0123456789abcdef0", "--results-url", "http://10.0.0.5:8000"]
    code, out, err = run(
        capsys, "probe", "run", "--quick", "--instance-type", "g4dn.12xlarge", "--backend", "nccl", *ec2
    )
    assert code == 0, err
    assert "queued quick probe job" in out and "network.probe_job_ids" in " ".join(out.split())
    with transaction(cli_db) as session:
        (job,) = session.scalars(select(Job)).all()
        request = dict(job.request)
    assert request["node_counts"] == [2] and request["ranks_per_node"] == 1
    assert request["ec2"]["max_cost_usd"] == 5.0 and request["ec2"]["timeout_s"] == 900.0
    code, _, err = run(
        capsys, "probe", "run", "--quick", "--instance-type", "g4dn.12xlarge", *ec2, "--max-cost-usd", "1"
    )
    assert code == 2 and "ec2.max_cost_usd" in err
    code, _, err = run(capsys, "probe", "run", "--quick", "--provider", "ec2", "--instance-type", "g5.xlarge")
    assert code == 2 and err.startswith("error: --image-id: an EC2 quick probe needs --image-id"), err
    code, _, err = run(capsys, "probe", "run", "--quick")
    assert code == 2 and "--instance-type" in err


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("g4dn.xlarge=0", "'g4dn.xlarge=0': 0 Gbit/s is not a positive rate. To fix: give the node-to-node"),
        ("g4dn.xlarge=-3", "'g4dn.xlarge=-3': -3 Gbit/s is not a positive rate"),
        ("g4dn.xlarge=nan", "'g4dn.xlarge=nan': nan Gbit/s is not a positive rate"),
        ("g4dn.xlarge=4.5Gbps", "'g4dn.xlarge=4.5Gbps' is not TYPE=GBPS"),
        ("g4dn.xlarge", "'g4dn.xlarge' is not TYPE=GBPS"),
    ],
)
def test_a_measured_rate_that_is_not_positive_is_told_from_a_malformed_one(
    item: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--measured-gbps g4dn.xlarge=0` (or -3, nan) said "'g4dn.xlarge=0' is not TYPE=GBPS": it is, and the
    rate is what is wrong. Both messages name the option."""
    request = tmp_path / "p.yaml"
    request.write_text(
        "model: resnet50\niterations: 10\n"
        "config: {choices: [{instance_type: g4dn.xlarge, count: 2, batch: 8}]}\n"
    )
    code, out, err = run(capsys, "predict", str(request), "--measured-gbps", item)
    text = " ".join(err.split())
    assert code == 2 and out == "", text
    assert text.startswith("error: --measured-gbps: ") and words in text, text
