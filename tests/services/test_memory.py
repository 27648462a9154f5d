"""The plan's memory and device checks over real candidates: CPU profiles for GPU types refused or marked,
every GPU candidate's batch within what its memory holds, types that cannot hold the model left out; and
`srift plan` on the example request shows memory per GPU for every choice, within the GPU's memory."""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from srift.cli import main
from srift.domain import ComputeCurve, InstanceType, Interconnect, LayerGrad, Market, ModelProfile, Offer
from srift.domain.memory import BATCH_LIMIT_FACT, MARGIN_FRACTION, profile_memory
from srift.errors import InvalidInput
from srift.optimize.space import Candidate
from srift.services.memory import check_fleet_member, fit_candidates
from srift.settings import get_settings

P = 4_000_000
"""One million fp32 parameters."""


def candidate(
    name: str, *, gpus: int, max_batch: int, per_sample_s: float, price: float, cap: int
) -> Candidate:
    """A GPU type with 16 GiB per GPU and a profile of its accelerator."""
    inst = InstanceType(
        provider="aws",
        name=name,
        gpu_model=f"G-{name}",
        gpu_count=gpus,
        gpu_memory_gib=16.0,
        vcpus=8 * gpus,
        memory_gib=32.0 * gpus,
        network_gbps=10.0,
        network_burst=False,
        interconnect=Interconnect.PCIE if gpus > 1 else Interconnect.NONE,
        interconnect_gbps=100.0,
        efa=False,
    )
    profile = ModelProfile(
        model="toy",
        accelerator=inst.accelerator,
        max_batch=max_batch,
        forward=ComputeCurve((1, max_batch), (per_sample_s, per_sample_s * max_batch)),
        backward=ComputeCurve((1, max_batch), (2 * per_sample_s, 2 * per_sample_s * max_batch)),
        layers=(LayerGrad("l0", P, 1.0),),
        straggler_cv=0.0,
    )
    offer = Offer(
        instance=inst,
        region="us-east-1",
        market=Market.SPOT,
        price_usd_per_hr=price,
        source="test",
        as_of=date(2026, 1, 1),
    )
    return Candidate(offer=offer, profile=profile, cap=cap)


def _with_memory(cand: Any, *, per_sample: float, device: str = "cuda:0") -> Any:
    memory = {"parameter_bytes": P, "activation_bytes": [1_000_000, per_sample], "optimizer": "adam"}
    profile = dataclasses.replace(
        cand.profile, device=device, extra={"profiler": "srift.profiling", "training_memory": memory}
    )
    return dataclasses.replace(cand, profile=profile)


def test_every_gpu_candidate_keeps_its_batch_within_memory() -> None:
    """16 GiB GPUs, Adam, DDP: 100 MB per sample allows (0.9 × 16 GiB − 20 MB − 1,114 MiB − 1 MB) / 100 MB
    = 142 samples, below the profile's 512; 1 kB per sample allows far more than 512, which stays."""
    heavy = _with_memory(
        candidate("g.big", gpus=1, max_batch=512, per_sample_s=1e-3, price=1.0, cap=4), per_sample=100e6
    )
    light = _with_memory(
        candidate("g.small", gpus=4, max_batch=512, per_sample_s=1e-3, price=2.0, cap=4), per_sample=1e3
    )
    kept, notes = fit_candidates([heavy, light], allow_cpu_profiles=False, field="profiles")
    assert [c.profile.max_batch for c in kept] == [142, 512]
    assert "capped by memory" in kept[0].profile.extra[BATCH_LIMIT_FACT] and len(notes) == 1
    for cand in kept:
        memory = profile_memory(cand.profile)
        assert memory is not None
        usable = (1 - MARGIN_FRACTION) * cand.instance.gpu_memory_gib * 2**30
        assert memory.peak_bytes(cand.profile.max_batch) <= usable


def test_a_type_that_cannot_hold_the_model_is_left_out() -> None:
    huge = _with_memory(
        candidate("g.tiny", gpus=1, max_batch=64, per_sample_s=1e-3, price=1.0, cap=4), per_sample=1e3
    )
    huge = dataclasses.replace(
        huge,
        profile=dataclasses.replace(
            huge.profile,
            extra={
                **huge.profile.extra,
                "training_memory": {"parameter_bytes": 4 << 30, "activation_bytes": [0, 1]},
            },
        ),
    )
    kept, notes = fit_candidates([huge], allow_cpu_profiles=False, field="profiles")
    assert kept == () and "left out" in notes[0]


def test_a_cpu_profile_for_a_gpu_type_is_refused_unless_allowed_and_then_marked() -> None:
    cpu = _with_memory(
        candidate("g.big", gpus=1, max_batch=64, per_sample_s=1e-3, price=1.0, cap=4),
        per_sample=1e3,
        device="cpu",
    )
    with pytest.raises(InvalidInput) as err:
        fit_candidates([cpu], allow_cpu_profiles=False, field="profile_ids")
    assert err.value.field == "profile_ids"
    kept, notes = fit_candidates([cpu], allow_cpu_profiles=True, field="profile_ids")
    assert len(kept) == 1 and any("stand-in" in n for n in notes)


def test_a_predicted_member_above_the_memory_limit_names_its_batch() -> None:
    heavy = _with_memory(
        candidate("g.big", gpus=1, max_batch=512, per_sample_s=1e-3, price=1.0, cap=4), per_sample=100e6
    )
    assert (
        check_fleet_member(
            heavy.profile,
            heavy.instance,
            per_gpu_batch=142,
            allow_cpu_profiles=False,
            field="config.choices[0].x",
        )
        == ()
    )
    with pytest.raises(InvalidInput) as err:
        check_fleet_member(
            heavy.profile,
            heavy.instance,
            per_gpu_batch=143,
            allow_cpu_profiles=False,
            field="config.choices[0].instance_type",
        )
    assert err.value.field == "config.choices[0].batch" and "at most 142 per GPU" in err.value.hint


def test_the_example_plan_shows_memory_per_gpu_for_every_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/plan.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit):
            main(["plan", "--example"])
        request = tmp_path / "request.yaml"
        request.write_text(capsys.readouterr().out)
        with pytest.raises(SystemExit) as done:
            main(["plan", str(request), "--json"])
        out, err = capsys.readouterr()
        assert done.value.code in (0, None), err
    finally:
        get_settings.cache_clear()
    plan = json.loads(out)
    fleets = [plan["choices"], *(b["choices"] for b in plan["baselines"].values() if b)]
    for choices in fleets:
        for c in choices:
            assert c["memory_per_gpu_bytes"] is not None, c
            assert c["memory_per_gpu_bytes"] <= (1 - MARGIN_FRACTION) * c["gpu_memory_bytes"], c


def test_a_predicted_member_with_a_cpu_profile_is_refused_unless_allowed_and_then_marked() -> None:
    cpu = _with_memory(
        candidate("g.big", gpus=1, max_batch=64, per_sample_s=1e-3, price=1.0, cap=4),
        per_sample=1e3,
        device="cpu",
    )
    with pytest.raises(InvalidInput) as err:
        check_fleet_member(
            cpu.profile, cpu.instance, per_gpu_batch=8, allow_cpu_profiles=False, field="config.choices[1].x"
        )
    assert err.value.field == "config.choices[1].x"
    notes = check_fleet_member(
        cpu.profile, cpu.instance, per_gpu_batch=8, allow_cpu_profiles=True, field="config.choices[1].x"
    )
    assert len(notes) == 1 and "measured on the CPU" in notes[0]


def test_a_plan_refuses_a_cpu_profile_labelled_t4_unless_asked_and_then_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's CNN, profiled on this CPU and labelled T4 (srift/testing/data), on g4dn types."""
    import yaml

    from srift.testing.plans import cnn_t4_profile

    profile = cnn_t4_profile()
    assert profile["device"] == "cpu" and profile["extra"]["profiler"] == "srift.profiling"
    request = {
        "profiles": [profile],
        "global_batch": 256,
        "iterations": 1000,
        "provider": "aws",
        "region": "us-east-1",
        "market": "on_demand",
        "availability": {"g4dn.xlarge": 2, "g4dn.2xlarge": 2},
    }
    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/plan.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()

    def plan(body: dict[str, Any]) -> tuple[int, str, str]:
        path = tmp_path / "request.yaml"
        path.write_text(yaml.safe_dump(body))
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path), "--json"])
        out, err = capsys.readouterr()
        return int(done.value.code or 0), out, err

    try:
        code, _, err = plan(request)
        assert code != 0 and "measured on cpu" in err and "allow_cpu_profiles" in err
        code, out, err = plan({**request, "allow_cpu_profiles": True})
        assert code == 0, err
    finally:
        get_settings.cache_clear()
    assert any("stand-in" in w for w in json.loads(out)["warnings"])
