"""`srift plan` prints the warnings about its fleet's types in full and sums up those a catalog-wide request
repeats once per other type; --verbose and the API's `warnings` keep every one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from srift.cli import main
from srift.commands.plan import warning_lines


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    assert done.value.code in (0, None), err
    return " ".join(out.split())


def test_the_example_plan_sums_up_the_other_types_batch_caps_in_one_line(
    local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`srift plan --example > r.yaml && srift plan r.yaml` printed about 40 lines "<type>: batch N per GPU,
    capped by memory (...)", one per type of the catalog: the plan could not be read for them."""
    request = tmp_path / "r.yaml"
    request.write_text(_example(capsys))
    plan = json.loads(run(capsys, "plan", str(request), "--json"))
    chosen = {c["instance_type"] for c in plan["choices"]}
    capped = [w for w in plan["warnings"] if "capped by memory" in w]
    other = [w for w in capped if w.split(":")[0] not in chosen]
    assert len(other) > 20 and len(capped) - len(other) <= len(chosen)

    out = run(capsys, "plan", str(request))
    assert f"warning: batch capped by memory on {len(other)} other types (--verbose lists each)" in out
    assert not any(w in out for w in other), out
    for choice in plan["choices"]:  # the fleet's own caps, in full
        if choice.get("batch_limit"):
            assert f"batch limit: {choice['batch_limit']}" in out
            assert out.count(choice["batch_limit"]) == 1, out
    assert len(re.findall(r"capped by memory", out)) == 1 + sum(
        1 for c in plan["choices"] if c.get("batch_limit")
    )

    verbose = run(capsys, "plan", str(request), "--verbose")
    assert all(f"warning: {w}" in verbose for w in other) and "other types" not in verbose


def _example(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(["plan", "--example"])
    return capsys.readouterr().out


def _cap(instance_type: str, batch: int) -> str:
    return (
        f"{instance_type}: batch {batch} per GPU, capped by memory (14.4 of 16.0 GiB at {batch}, adam, DDP, "
        "10% margin; the profile allows 327)"
    )


def test_warnings_about_the_fleet_stay_whole_and_a_lone_other_type_is_not_summed_up() -> None:
    fleet = [{"instance_type": "g4dn.xlarge", "batch": 64}]
    left_out = [f"{t} left out: m does not fit one GPU's memory at batch 1 (20.0 GiB needed)" for t in "ab"]
    plan = {
        "choices": fleet,
        "warnings": [
            "retired families left out",
            _cap("g4dn.xlarge", 309),
            _cap("p3.2xlarge", 309),
            *left_out,
        ],
    }
    assert warning_lines(plan) == [
        "retired families left out",
        _cap("g4dn.xlarge", 309),  # the fleet's type, with no "batch limit:" line saying it
        _cap("p3.2xlarge", 309),  # one other type: a summary would be no shorter
        "left out (the model does not fit one GPU's memory at batch 1) on 2 other types "
        "(--verbose lists each)",
    ]
    assert warning_lines(plan, verbose=True) == plan["warnings"]
    said = {**plan, "choices": [{**fleet[0], "batch_limit": _cap("g4dn.xlarge", 309)}]}
    assert _cap("g4dn.xlarge", 309) not in warning_lines(said)
